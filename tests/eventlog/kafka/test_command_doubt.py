"""Commands whose finishing commit fails in doubt, against a real broker.

A command is handed out once per ownership, so one whose ack fails in doubt
must be acked again by the runtime (once the doubt is settled, a landed ack
is not answered twice), and a reopened owner must not hand out again, when a
rebalance keeps its partition, the commands it handed out before the reopen.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from aiokafka import TopicPartition

from agentlog.errors import BackendUnavailableError
from agentlog.eventlog._base import Command
from agentlog.eventlog.events import ResumeReceived
from agentlog.eventlog.kafka._admin import partition_for
from agentlog.eventlog.kafka._commands import command_ref, decode_reply
from agentlog.eventlog.kafka._grouplog import PartitionedKafkaEventLog
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end
from tests.eventlog.kafka.group_support import (
    PARTITIONS,
    SETTLE_S,
    CommitInDoubt,
    committed_records,
    open_log,
    same_partition_runs,
    settle,
    started,
    take,
)

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]


def _plain() -> Workflow:
    wf = Workflow("plain", state={"n": "replace"})

    @wf.step
    async def one(ctx: StepContext) -> Any:
        return end(n=1)

    return wf


@pytest.mark.parametrize("landed", [False, True], ids=["aborted", "landed"])
async def test_a_worker_acks_again_a_command_whose_ack_was_in_doubt(
    kafka_bootstrap: str, kafka_name: str, landed: bool
) -> None:
    """X (an answer for a run not started yet: refused, acked) and Y (the run's
    start) in one chain; X's ack commit fails in doubt. X still gets a reply,
    and Y is applied."""
    wf = _plain()
    base = f"kafka://{kafka_bootstrap}/{kafka_name}"
    client = await Runtime.open(
        f"{base}?layout=partitioned&partitions=2",
        workflows=[wf],
        config=RuntimeConfig(owner="client", execute=False, worker=False),
    )
    worker = await Runtime.open(
        f"{base}?group=workers&partitions=2&session_timeout=6",
        workflows=[wf],
        config=RuntimeConfig(owner="w", worker=False),
    )
    tasks: list[asyncio.Task[Any]] = []
    try:
        log = worker.log
        assert isinstance(log, PartitionedKafkaEventLog) and log.member is not None
        member = log.member
        await settle([log], lambda: len(log.owned_partitions) == 2, "worker")
        run = "ghost"
        owner = member.owners[partition_for(run, 2)]
        doubt = CommitInDoubt(owner, landed=landed)
        sent = await client.log.send_command(Command(run, "resume", ResumeReceived(value=1)))
        outcome = asyncio.create_task(client.log.command_outcome(sent))
        tasks += [outcome, asyncio.create_task(client.submit(wf, run_id=run, input={"n": 0}))]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_S
        found = None
        while not (outcome.done() and found) and loop.time() < deadline:
            with contextlib.suppress(BackendUnavailableError):  # a pass may say so
                await worker.worker.run_once()
            await log.wait_for_ownership_change(0.2)
            found = await log.find_run(run)
        assert doubt.failed == 1, "the injected doubt was not hit"
        assert outcome.done(), "X: no reply (its ack was never retried)"
        assert outcome.result() is False  # refused: the run did not exist
        assert found is not None, "Y (the run's start, behind X) was never applied"
        x = command_ref(sent)[1]
        assert x not in owner.commands.outstanding
        # One reply to X on record, whether its first ack landed or not.
        replies = [
            reply
            for record in await committed_records(
                kafka_bootstrap, log.layout.commands, owner.partition
            )
            if (reply := decode_reply(record.value)) is not None and reply[0] == x
        ]
        assert replies == [(x, False)], replies
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await worker.close()
        await client.close()


async def test_a_reopened_owner_does_not_hand_out_its_commands_again(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    """After a reopen (a commit in doubt, aborted), the consumer fetching again
    from the committed offset (what a rebalance that keeps the partition does)
    gets no command handed out a second time."""
    run, other, third = same_partition_runs(3, prefix="refetch")
    client = await open_log(kafka_bootstrap, kafka_name)
    member = await open_log(kafka_bootstrap, kafka_name, "workers")
    try:
        await settle([member], lambda: len(member.owned_partitions) == PARTITIONS, "member")
        await client.send_command(Command(run, "resume", started()))
        [command] = await take(member, 1)
        p, offset = command_ref(command)
        assert member.member is not None
        owner = member.member.owners[p]
        CommitInDoubt(owner, landed=False)
        with pytest.raises(BackendUnavailableError):
            await member.claim_writer(other, owner="t")
        await member.claim_writer(third, owner="t")  # reopens the owner, then commits
        assert offset in owner.commands.outstanding  # still handed out, not finished
        # A sentinel command after it: once it is taken, the fetch from the
        # committed offset has passed the first command.
        await client.send_command(Command(other, "resume", started()))
        member.member.consumer.seek(TopicPartition(member.layout.commands, p), offset)
        taken = await take(member, 1)
        assert [c.run_id for c in taken] == [other], taken
        assert await member.take_commands(limit=10) == []
    finally:
        await member.close()
        await client.close()
