"""A worker's pass over a member holding parked runs: its work does not grow with them.

A parked run (waiting on a human's answer, no timer) needs nothing until a
command names it. Each pass of a worker asks its log for the runs due
(``runnable``) and for the next timer (``next_wake``); a member that looked
at every run it owns for both made each pass cost as much as the parked runs
it held, so parking 100,000 runs slowed down as they piled up. The work is
counted, not timed: the Python lines the two calls execute (``sys.settrace``),
at two sizes with the same runs in flight.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import timedelta
from types import FrameType
from typing import Any

import pytest

from agentlog.eventlog.events import Event, InterruptRaised, ResumeReceived, RunStatus, utcnow
from agentlog.eventlog.kafka._grouplog import PartitionedKafkaEventLog
from tests.eventlog.kafka.group_support import PARTITIONS, open_log, settle, start_run, started

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

SMALL, LARGE = 10, 150


def _interrupt(*, due_in: timedelta | None = None) -> InterruptRaised:
    due = None if due_in is None else utcnow() + due_in
    return InterruptRaised(
        "ask", 1, 0, 0, "ok?", due_at=due, kind="input" if due is None else "timer"
    )


async def _park(
    log: PartitionedKafkaEventLog, run_id: str, *, due_in: timedelta | None = None
) -> None:
    """Record a run that waits: on a human (no timer), or on a timer ``due_in`` from now."""
    epoch = await log.claim_writer(run_id, owner="test")
    await log.append(
        [
            Event(run_id, 1, started(), writer_epoch=epoch),
            Event(run_id, 2, _interrupt(due_in=due_in), writer_epoch=epoch),
        ]
    )
    await log.release_lease(run_id, epoch)


async def _lines(call: Callable[[], Awaitable[Any]]) -> tuple[int, Any]:
    """The Python lines ``call()`` executes (every frame it enters), and its result."""
    count = 0

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        result = await call()
    finally:
        sys.settrace(None)
    return count, result


async def _pass_work(log: PartitionedKafkaEventLog) -> tuple[int, list[str], Any]:
    """What a pass asks the log: the work, the runs due, the next wake-up."""
    due_work, due = await _lines(lambda: log.runnable())
    wake_work, wake = await _lines(log.next_wake)
    return due_work + wake_work, [info.run_id for info in due], wake


async def _owning_all(bootstrap: str, name: str) -> PartitionedKafkaEventLog:
    log = await open_log(bootstrap, name, "workers")
    await settle([log], lambda: len(log.owned_partitions) == PARTITIONS, "one member owns all")
    return log


async def test_a_pass_does_the_same_work_with_10_or_150_parked_runs(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    log = await _owning_all(kafka_bootstrap, kafka_name)
    try:
        # The same runs in flight at both sizes: one running (no lease), one on a timer.
        await start_run(log, "running")
        await _park(log, "sleeper", due_in=timedelta(hours=1))
        sleeper = await log.find_run("sleeper")
        assert sleeper is not None and sleeper.wake_at is not None
        parked = [f"parked-{n:04d}" for n in range(LARGE)]
        await asyncio.gather(*(_park(log, run_id) for run_id in parked[:SMALL]))
        small, due, wake = await _pass_work(log)
        assert (due, wake) == (["running"], sleeper.wake_at)
        await asyncio.gather(*(_park(log, run_id) for run_id in parked[SMALL:]))
        info = await log.find_run(parked[-1])
        assert info is not None and info.status == RunStatus.WAITING
        large, due, wake = await _pass_work(log)
        assert (due, wake) == (["running"], sleeper.wake_at)
        assert large < small * 1.5, (
            f"a pass executed {small} lines with {SMALL} parked runs and {large} with {LARGE}: "
            "it looks at every parked run"
        )

        # Answered, a parked run needs a worker again.
        epoch = await log.claim_writer(parked[0], owner="test")
        await log.append([Event(parked[0], 3, ResumeReceived(True), writer_epoch=epoch)])
        await log.release_lease(parked[0], epoch)
        assert [i.run_id for i in await log.runnable()] == ["running", parked[0]]
    finally:
        await log.close()

    # A new owner reads the runs in flight from the partitions it opens.
    log = await _owning_all(kafka_bootstrap, kafka_name)
    try:
        again, due, wake = await _pass_work(log)
        assert sorted(due) == ["parked-0000", "running"]
        assert wake == sleeper.wake_at
        assert again < small * 1.5, f"a new owner's pass executed {again} lines (was {small})"
    finally:
        await log.close()


def _scan_lines() -> tuple[Callable[[], int], Callable[[], None]]:
    """Count the lines executed in ``KafkaReader.scan`` (a run's events picked from
    a partition's records) from now on; returns (count, stop)."""
    count = 0

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if frame.f_code.co_name != "scan":
            return None
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    return (lambda: count), (lambda: sys.settrace(None))


async def test_reading_parked_runs_costs_each_run_its_own_events(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    """A new owner (and a client's run list) extends every run's index entry by
    the events after it, from one read of the partition: each run looks at its
    own events only, not at every record read (which made a worker's start-up
    grow with the square of its parked runs)."""
    log = await _owning_all(kafka_bootstrap, kafka_name)
    try:
        parked = [f"parked-{n:04d}" for n in range(LARGE)]
        await asyncio.gather(*(_park(log, run_id) for run_id in parked[:SMALL]))
        client = await open_log(kafka_bootstrap, kafka_name)
        try:
            count, stop = _scan_lines()
            try:
                waiting = await client.list_runs(status=RunStatus.WAITING)
            finally:
                stop()
            small = count()
            assert len(waiting) == SMALL
        finally:
            await client.close()
        await asyncio.gather(*(_park(log, run_id) for run_id in parked[SMALL:]))
        client = await open_log(kafka_bootstrap, kafka_name)
        try:
            count, stop = _scan_lines()
            try:
                waiting = await client.list_runs(status=RunStatus.WAITING)
            finally:
                stop()
            large = count()
            assert len(waiting) == LARGE
        finally:
            await client.close()
    finally:
        await log.close()
    per_run_small, per_run_large = small / SMALL, large / LARGE
    assert per_run_large < per_run_small * 1.5, (
        f"reading {SMALL} parked runs executed {small} lines of scan, {LARGE} executed {large}"
    )


async def _records_read_for(bootstrap: str, name: str, run_id: str) -> tuple[int, list[int]]:
    """A new owner (no events of its own kept) reads ``run_id``: the records it
    fetched from the events topic for it, and the seqs it read."""
    log = await _owning_all(bootstrap, name)
    try:
        seqs = [event.seq async for event in log.read(run_id)]
        return log._reader.last_read_records, seqs
    finally:
        await log.close()


async def test_an_owner_reads_a_run_up_to_its_tail_not_to_the_partitions_end(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    """Taking over a run started long ago (after a restart or a rebalance, its
    owner keeps none of its events) read its partition from the run's first
    event to the partition's end: every event of every run written since, so
    the take-overs of a worker behind on thousands of started runs each cost
    more as runs piled up. The owner knows where the run's events end."""
    log = await _owning_all(kafka_bootstrap, kafka_name)
    try:
        await start_run(log, "old")
        parked = [f"parked-{n:04d}" for n in range(LARGE)]
        await asyncio.gather(*(_park(log, run_id) for run_id in parked[:SMALL]))
    finally:
        await log.close()
    small, seqs = await _records_read_for(kafka_bootstrap, kafka_name, "old")
    assert seqs == [1]
    log = await _owning_all(kafka_bootstrap, kafka_name)
    try:
        await asyncio.gather(*(_park(log, run_id) for run_id in parked[SMALL:]))
    finally:
        await log.close()
    large, seqs = await _records_read_for(kafka_bootstrap, kafka_name, "old")
    assert seqs == [1]
    assert large <= small + 1, (
        f"reading one run fetched {small} records with {SMALL} runs written after it, "
        f"{large} with {LARGE}: it reads to the partition's end"
    )
