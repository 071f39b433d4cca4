"""A thread's next batch of events: made, folded in once appended, and why an append was refused.

Shared by the store's two ways to append (on the saver's loop, and on a
caller's thread with no loop): see :mod:`agentlog.langgraph._store`.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentlog.errors import ConflictError, FencedError
from agentlog.eventlog.events import (
    LANGGRAPH_WORKFLOW,
    CheckpointsRemoved,
    Event,
    EventData,
    RunStarted,
)
from agentlog.langgraph._convert import Heads
from agentlog.langgraph._thread import ThreadModel

__all__ = ["STALE", "fold_in", "next_events", "refused_because"]

#: Why a write of a namespace served before another writer's event is refused.
STALE = "another process appended to it since this saver last read it"


def next_events(model: ThreadModel, epoch: int | None, items: Sequence[EventData]) -> list[Event]:
    """``items`` as the thread's next events under writer ``epoch``, its run's
    RunStarted first if the thread has no event yet."""
    if model.seq == 0:
        items = [_thread_started(), *items]
    assert epoch is not None
    return [
        Event(model.thread_id, model.seq + 1 + i, data, writer_epoch=epoch)
        for i, data in enumerate(items)
    ]


def fold_in(model: ThreadModel, heads: Heads, events: Sequence[Event]) -> None:
    """Fold ``events`` into the model (a removal of everything drops the heads too)."""
    for event in events:
        model.apply(event)
        if isinstance(event.data, CheckpointsRemoved) and event.data.everything:
            heads.clear()


def refused_because(exc: ConflictError | FencedError) -> str:
    """Why the log refused a thread's append, for a ThreadConflictError."""
    if isinstance(exc, FencedError):
        return (
            f"another process claimed it (writer epoch {exc.current} fences this one's {exc.epoch})"
        )
    return f"another process appended to it (its next seq is {exc.expected}, not {exc.got})"


def _thread_started() -> RunStarted:
    return RunStarted(
        workflow=LANGGRAPH_WORKFLOW,
        version="",
        input=None,
        durability="sync",
        fingerprint="",
    )
