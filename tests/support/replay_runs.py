"""Builders of run lists for the replay tests: many small runs, appended directly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agentlog.eventlog import Event, EventLog, RunCompleted, RunFailed, RunStarted, StepCompleted
from agentlog.eventlog.events import EventData

T0 = datetime(2025, 1, 1, tzinfo=UTC)
WORKFLOWS = ("alpha", "beta", "gamma")


def run_events(run_id: str, i: int) -> list[Event]:
    """Run number ``i``: its workflow, status and update time follow from ``i``.

    Every third run is still running, every fifth of the rest failed; updates
    are one minute apart, with pairs of runs sharing a time (ties order by id).
    """
    at = T0 + timedelta(minutes=i // 2)
    data: list[EventData] = [
        RunStarted(WORKFLOWS[i % 3], "1", {}, "sync", "fp", {}, ["s"]),
        StepCompleted("s", 0, 0, {"n": i}),
    ]
    if i % 3:
        data.append(RunFailed("boom") if i % 5 == 0 else RunCompleted())
    return [
        Event(run_id, seq, d, ts=at - timedelta(seconds=len(data) - seq), writer_epoch=1)
        for seq, d in enumerate(data, 1)
    ]


async def add_runs(log: EventLog, ids: list[tuple[str, int]]) -> None:
    """Record each run ``(run_id, i)`` of :func:`run_events` in ``log``."""
    for run_id, i in ids:
        await log.claim_writer(run_id)
        await log.append(run_events(run_id, i), durable=False)
