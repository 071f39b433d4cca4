"""Commands on the real broker: sent by a non-member, applied by the owner once.

The offset of a command joins the transaction of its effect (the event it
asks for), so after a crash a command whose effect is recorded is never
handed out again, and one whose effect is not is handed out again.
"""

from __future__ import annotations

import pytest

from agentlog.errors import BackendUnavailableError
from agentlog.eventlog._base import Command
from agentlog.eventlog.events import Event
from tests.eventlog.kafka.group_support import (
    PARTITIONS,
    CommitInDoubt,
    apply_start,
    open_log,
    same_partition_runs,
    settle,
    started,
    take,
)

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]


async def test_a_command_is_taken_once_and_again_only_if_its_effect_was_lost(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    applied, lost, refused, last = same_partition_runs(4)
    client = await open_log(kafka_bootstrap, kafka_name)
    try:
        for run_id in (applied, lost, refused):
            await client.send_command(Command(run_id, "start", started()))

        first = await open_log(kafka_bootstrap, kafka_name, "workers")
        try:
            await settle([first], lambda: len(first.owned_partitions) == PARTITIONS, "member")
            taken = await take(first, 3)
            assert [c.run_id for c in taken] == [applied, lost, refused]
            await apply_start(first, taken[0])  # its offset commits with its effect
            await first.ack_command(taken[2])  # refused: acked with no effect
            # taken[1]: the process "crashes" before applying it (closing
            # commits nothing more: offsets move only inside transactions).
        finally:
            await first.close()

        await client.send_command(Command(last, "start", started()))
        second = await open_log(kafka_bootstrap, kafka_name, "workers")
        try:
            await settle([second], lambda: len(second.owned_partitions) == PARTITIONS, "member")
            again = await take(second, 2)
            assert [c.run_id for c in again] == [lost, last]
            for command in again:
                await apply_start(second, command)
                await second.ack_command(command)  # after its effect: nothing more to commit
        finally:
            await second.close()

        third = await open_log(kafka_bootstrap, kafka_name, "workers")
        try:
            await settle([third], lambda: len(third.owned_partitions) == PARTITIONS, "member")
            await client.send_command(Command("sentinel", "cancel", started()))
            # Everything before the sentinel was applied or acked: only it comes.
            assert [c.run_id for c in await take(third, 1)] == ["sentinel"]
        finally:
            await third.close()
        for run_id in (applied, lost, last):
            assert [e.type async for e in client.read(run_id)] == ["RunStarted"]
        assert await client.find_run(refused) is None
    finally:
        await client.close()


@pytest.mark.parametrize("landed", [False, True], ids=["aborted", "landed"])
async def test_an_ack_after_a_commit_in_doubt_is_committed_with_its_reply(
    kafka_bootstrap: str, kafka_name: str, landed: bool
) -> None:
    """Another run's append fails in doubt; the runtime's ack of a refused command
    is the commit that settles it (the owner reopens and reads its command offsets
    again). The ack is not lost with the owner's state: its reply says refused,
    and the next owner does not hand the command out again."""
    refused, other = same_partition_runs(2, prefix="doubt")
    client = await open_log(kafka_bootstrap, kafka_name)
    member = await open_log(kafka_bootstrap, kafka_name, "workers")
    try:
        await settle([member], lambda: len(member.owned_partitions) == PARTITIONS, "member")
        sent = await client.send_command(Command(refused, "start", started()))
        [command] = await take(member, 1)
        assert member.member is not None
        owner = member.member.owners[member.layout.partition_of(other)]
        epoch = await member.claim_writer(other, owner="test")
        CommitInDoubt(owner, landed)
        with pytest.raises(BackendUnavailableError):
            await member.append([Event(other, 1, started(), writer_epoch=epoch)])
        await member.ack_command(command)
        assert await client.command_outcome(sent) is False
    finally:
        await member.close()
    again = await open_log(kafka_bootstrap, kafka_name, "workers")
    try:
        await settle([again], lambda: len(again.owned_partitions) == PARTITIONS, "member")
        await client.send_command(Command("sentinel", "cancel", started()))
        assert [c.run_id for c in await take(again, 1)] == ["sentinel"]
    finally:
        await again.close()
        await client.close()
