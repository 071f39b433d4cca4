"""Builders of events for the shipped suites (and for a backend's own tests)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from agentlog.eventlog._base import EventLog, EventReader
from agentlog.eventlog.events import (
    Event,
    EventData,
    InterruptRaised,
    ResumeReceived,
    RunCompleted,
    RunStarted,
    StepCompleted,
    StepFailed,
    SuperstepCommitted,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
    WriterClaimed,
)

__all__ = ["T0", "ev", "every_event_type", "read_all", "seed", "started"]

#: The timestamp of seq 0 in :func:`ev`: fixed, with microseconds, so a
#: backend that rounds or shifts timestamps is caught.
T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def ev(run_id: str, seq: int, data: EventData | None = None, epoch: int = 0) -> Event:
    """An event with a deterministic timestamp (one second per seq)."""
    data = data if data is not None else TaskCompleted(key=f"k{seq}", result=seq)
    return Event(run_id, seq, data, ts=T0 + timedelta(seconds=seq), writer_epoch=epoch)


def started(workflow: str = "wf") -> RunStarted:
    """A RunStarted of ``workflow`` version 1.0."""
    return RunStarted(workflow, "1.0", {"q": "hi"}, "sync", "fp1", {"steps": 10}, ["a"])


async def read_all(log: EventReader, run_id: str, **kwargs: Any) -> list[Event]:
    """Every event :meth:`~agentlog.eventlog._reader.EventReader.read` yields."""
    return [event async for event in log.read(run_id, **kwargs)]


async def seed(log: EventLog, run_id: str, count: int, epoch: int = 0) -> list[Event]:
    """Append ``count`` events to a fresh run; return them."""
    events = [ev(run_id, seq, epoch=epoch) for seq in range(1, count + 1)]
    await log.append(events)
    return events


def every_event_type(run_id: str) -> list[Event]:
    """One run holding one event of each type, with awkward payload values."""
    payloads: list[EventData] = [
        started(),
        WriterClaimed(epoch=0, owner="host:1"),
        TaskStarted("key-1", "fetch", "a", 1, 0, 0),
        TaskCompleted("key-1", {"uuid-ish": b"\x00\xff", "n": [1, 2.5, None]}, 12.5),
        TaskFailed("key-2", "ValueError: nope", 2, 3.0),
        StepCompleted("a", 1, 0, {"messages": ["x"], "count": 1}, ["b"]),
        StepFailed("b", 2, 0, 1, "boom", retryable=False),
        SuperstepCommitted(1, ["b"]),
        InterruptRaised("b", 2, 0, 0, {"question": "ok?"}),
        ResumeReceived({"answer": True}),
        RunCompleted({"done": True}),
    ]
    return [
        Event(run_id, seq, data, ts=T0 + timedelta(microseconds=seq))
        for seq, data in enumerate(payloads, start=1)
    ]
