"""What a member keeps in memory for a parked run: what a command naming it needs.

A parked run (waiting on a human, no timer) needs nothing until a command
names it; its owner keeps its tail and its snapshots, but not the events it
last committed (kept to serve the driver's reads while it runs) nor more than
one known (seq, offset) point. Counted, not timed: the entries held per run,
at two sizes of parked runs; then an answer still continues a parked run from
what is kept (and the broker).
"""

from __future__ import annotations

import asyncio

import pytest

from agentlog.eventlog.events import Event, ResumeReceived, RunStatus
from agentlog.eventlog.kafka._grouplog import PartitionedKafkaEventLog
from tests.eventlog.kafka.group_support import PARTITIONS, open_log, settle, start_run
from tests.eventlog.kafka.test_group_pass_work import _park

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

SMALL, LARGE = 10, 100


def _kept(log: PartitionedKafkaEventLog) -> tuple[int, int]:
    """(runs with committed events kept, (seq, offset) points kept) in the member."""
    assert log.member is not None
    recent = sum(len(owner.recent._runs) for owner in log.member.owners.values())
    points = sum(len(points) for points in log._reader._points.values())
    return recent, points


async def test_a_parked_run_keeps_no_events_and_one_point(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    log = await open_log(kafka_bootstrap, kafka_name, "workers")
    try:
        await settle([log], lambda: len(log.owned_partitions) == PARTITIONS, "one member owns all")
        await start_run(log, "running")  # in flight at both sizes: its events are kept
        parked = [f"parked-{n:04d}" for n in range(LARGE)]
        await asyncio.gather(*(_park(log, run_id) for run_id in parked[:SMALL]))
        small = _kept(log)
        await asyncio.gather(*(_park(log, run_id) for run_id in parked[SMALL:]))
        large = _kept(log)
        assert small[0] == large[0] == 1, (
            f"committed events kept for {small[0]} runs with {SMALL} parked, "
            f"{large[0]} with {LARGE}: a parked run keeps its events"
        )
        # One point per run: the end of its last event (a snapshot at it needs no read).
        assert large[1] - small[1] == LARGE - SMALL, (
            f"{small[1]} points with {SMALL} parked runs, {large[1]} with {LARGE}"
        )

        # Answered, a parked run goes on from what its owner kept and the broker.
        run_id = parked[-1]
        epoch = await log.claim_writer(run_id, owner="test")
        await log.append([Event(run_id, 3, ResumeReceived(True), writer_epoch=epoch)])
        events = [e async for e in log.read(run_id)]
        assert [e.seq for e in events] == [1, 2, 3]
        assert [e.type for e in events] == ["RunStarted", "InterruptRaised", "ResumeReceived"]
        assert [e.seq async for e in log.read(run_id, after_seq=2)] == [3]
        info = await log.find_run(run_id)
        assert info is not None and info.status == RunStatus.RUNNING
        await log.release_lease(run_id, epoch)
    finally:
        await log.close()
