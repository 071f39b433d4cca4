"""A member behind on its commands holds a bounded number of them, not the backlog.

A client can send commands faster than the member's worker applies them (it
submits 100,000 runs while the worker parks a few hundred a second). The
commands wait on the broker; the member reads a partition's commands only
while it holds fewer than ``BUFFER_PER_PARTITION`` of them (decoded, handed
out or not), so its memory and the work of each commit do not grow with the
backlog. Counted, not timed: the commands held, sampled all along, at a
backlog of several times the bound; every command still comes, in order.
"""

from __future__ import annotations

import asyncio

import pytest

from agentlog.eventlog._base import Command
from agentlog.eventlog.kafka import _group
from agentlog.eventlog.kafka._admin import partition_for
from agentlog.eventlog.kafka._grouplog import PartitionedKafkaEventLog
from tests.eventlog.kafka.group_support import (
    PARTITIONS,
    SETTLE_S,
    open_log,
    settle,
    started,
)

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

BOUND, BACKLOG, TAKE = 8, 60, 3


def _one_partition_runs(count: int) -> list[str]:
    runs = (f"backlog-{n}" for n in range(count * PARTITIONS * 4))
    first = partition_for("backlog-0", PARTITIONS)
    chosen = [r for r in runs if partition_for(r, PARTITIONS) == first][:count]
    assert len(chosen) == count
    return chosen


def _held(member: PartitionedKafkaEventLog) -> tuple[int, int]:
    """(commands buffered, commands outstanding) in the member now."""
    group = member.member
    assert group is not None
    outstanding = sum(len(owner.commands.outstanding) for owner in group.owners.values())
    return len(group._buffer), outstanding


async def test_a_member_holds_a_bounded_number_of_a_backlogs_commands(
    kafka_bootstrap: str, kafka_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_group, "BUFFER_PER_PARTITION", BOUND, raising=False)
    runs = _one_partition_runs(BACKLOG)
    client = await open_log(kafka_bootstrap, kafka_name)
    try:
        for run_id in runs:  # the whole backlog first, then a member starts
            await client.send_command(Command(run_id, "start", started()))
        member = await open_log(kafka_bootstrap, kafka_name, "workers")
        try:
            await settle([member], lambda: len(member.owned_partitions) == PARTITIONS, "member")
            loop = asyncio.get_running_loop()
            deadline = loop.time() + SETTLE_S
            taken: list[str] = []
            most_buffered = most_outstanding = 0
            while len(taken) < BACKLOG:
                assert loop.time() < deadline, f"took {len(taken)} of {BACKLOG} commands"
                buffered, outstanding = _held(member)
                most_buffered = max(most_buffered, buffered)
                most_outstanding = max(most_outstanding, outstanding)
                for command in await member.take_commands(limit=TAKE):
                    taken.append(command.run_id)
                    await member.ack_command(command)  # refused: nothing more to hold
                await member.wait_for_ownership_change(0.02)
            assert taken == runs  # every command, once, in order
            assert most_buffered <= BOUND, (
                f"the member buffered {most_buffered} commands of a backlog of {BACKLOG} "
                f"(bound {BOUND}): it reads the whole backlog into memory"
            )
            assert most_outstanding <= BOUND + TAKE, (
                f"{most_outstanding} commands outstanding at once (bound {BOUND} + {TAKE} taken)"
            )
        finally:
            await member.close()
    finally:
        await client.close()
