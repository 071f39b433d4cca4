"""What a run's writer must do: the one surface the executor and its steps write through.

The executor, :class:`~agentlog.runtime._context.StepContext` and the task
calls never write to a log themselves: they hand every event to a
:class:`Writer` and ask it to run each task's effect. Two writers implement
it, and neither is built on the other:

* :class:`~agentlog.runtime._writer.RunWriter`, the live one: it appends to
  the log per the durability mode, guards each effect with the writer's
  lease and epoch, and calls the task's function;
* :class:`~agentlog.replay._verify_writer.ReplayWriter`, the replay check's:
  it matches each event against a recorded history, writes nothing, and
  answers each effect with its recorded outcome.

So a replay runs exactly the code a resume runs, and a change to what the
executor asks of a writer is a change to this protocol, seen by both.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from agentlog.eventlog.events import Event, EventData
from agentlog.projector._state import RunState

__all__ = ["Writer"]


class Writer(Protocol):
    """A run's writer, as the executor, its steps and their task calls use it."""

    @property
    def state(self) -> RunState:
        """The run's live state: the fold of every event emitted so far."""
        ...

    def emit(self, data: EventData, *, at: datetime | None = None) -> Event:
        """Record ``data`` as the run's next event and fold it into :attr:`state`
        (``at``: its time when not now; a replay keeps the recorded time).

        Returns:
            The event as recorded; for a ``TaskFailed`` or ``StepFailed``, its
            ``retryable`` is the verdict the executor follows.
        """
        ...

    def upcoming(self, superstep: int, branch: int) -> list[EventData]:
        """What this branch recorded that its code has not reached yet.

        The replay's answer: the branch's events of this session not matched
        yet. The live writer's is empty: its state holds all the run recorded.
        """
        ...

    async def flush(self) -> None:
        """End of a unit of work: write what is buffered, per the durability mode."""
        ...

    async def sync_point(self) -> None:
        """Return once everything emitted so far is durable (before a side effect)."""
        ...

    async def persist(self) -> None:
        """Return once everything emitted so far is durable, in every mode (an input)."""
        ...

    async def confirm_epoch(self) -> None:
        """Raise ``FencedError`` if another writer took the run (``exit`` mode asks the log)."""
        ...

    def check_live(self) -> None:
        """Raise unless this writer may begin a side effect now."""
        ...

    async def run_effect(
        self, key: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Run the effect of task ``key`` (its intent is on record) and return its result.

        The one place a task's body runs, or, in a replay, is answered from
        the record instead.
        """
        ...

    async def backoff(self, seconds: float) -> None:
        """Wait ``seconds`` before a retry."""
        ...

    async def close(self) -> None:
        """Write everything still buffered; the run parked, ended or stopped."""
        ...

    def abandon(self) -> None:
        """Drop what is not written yet (the writer was fenced or cancelled)."""
        ...
