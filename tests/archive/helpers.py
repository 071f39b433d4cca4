"""Builders of realistic runs for the archive tests."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from agentlog.eventlog import (
    Event,
    EventLog,
    InterruptRaised,
    ResumeReceived,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunStarted,
    StepCompleted,
    StepFailed,
    SuperstepCommitted,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
)
from agentlog.eventlog.events import EventData

T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def run_payloads(
    steps: int = 3, *, end: str | None = "completed", workflow: str = "research", tag: int = 0
) -> list[EventData]:
    """Payloads of one run: every event type, with awkward values in them."""
    data: list[EventData] = [
        RunStarted(
            workflow,
            "v2",
            {
                "question": f"q{tag}",
                "blob": b"\x00\xff\x10",
                "id": uuid.UUID(int=tag),
                "price": Decimal("19.99"),
                "when": T0,
                "nested": [1, 2.5, None, True, {"k": "v"}],
            },
            "sync",
            "fp-1",
            {"max_steps": 50},
            ["plan"],
        )
    ]
    for i in range(steps):
        key = f"k-{tag}-{i}"
        data.append(TaskStarted(key, "search" if i % 2 == 0 else "fetch", f"step{i}", i, 0, 0))
        if i == 1:
            data.append(TaskFailed(key, "TimeoutError: slow", 1, 30.0))
            data.append(TaskStarted(key, "fetch", f"step{i}", i, 0, 0, attempt=2))
        data.append(TaskCompleted(key, {"hits": i, "raw": b"r"}, 10.0 * (i + 1)))
        data.append(StepCompleted(f"step{i}", i, 0, {"notes": [f"n{i}"]}, [f"step{i + 1}"]))
        data.append(SuperstepCommitted(i, [f"step{i + 1}"]))
    data.append(StepFailed("review", steps, 0, 1, "ValueError: bad"))
    data.append(InterruptRaised("review", steps, 0, 0, {"ask": "approve?"}))
    data.append(ResumeReceived({"approved": True}))
    if end == "completed":
        data.append(RunCompleted({"answer": 42}))
    elif end == "failed":
        data.append(RunFailed("RuntimeError: gave up"))
    elif end == "cancelled":
        data.append(RunCancelled("user"))
    return data


def as_events(
    run_id: str,
    payloads: list[EventData],
    *,
    start: datetime = T0,
    first_seq: int = 1,
    epoch: int = 1,
) -> list[Event]:
    """Envelopes for ``payloads``, one second apart."""
    return [
        Event(run_id, first_seq + i, data, start + timedelta(seconds=first_seq + i - 1), epoch)
        for i, data in enumerate(payloads)
    ]


async def record_run(
    log: EventLog,
    run_id: str,
    *,
    steps: int = 3,
    end: str | None = "completed",
    workflow: str = "research",
    start: datetime = T0,
    tag: int = 0,
) -> list[Event]:
    """Append one run to ``log`` and return its events."""
    epoch = await log.claim_writer(run_id)
    events = as_events(
        run_id, run_payloads(steps, end=end, workflow=workflow, tag=tag), start=start, epoch=epoch
    )
    await log.append(events)
    return events


async def read_all(log: EventLog, run_id: str) -> list[Event]:
    """Every event of the run, through the seam."""
    return [e async for e in log.read(run_id)]
