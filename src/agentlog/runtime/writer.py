"""RunWriter: the one writer of a run, and where durability modes live.

:meth:`RunWriter.emit` gives the next seq to an event, folds it into the live
state (with the projector's ``apply``: the live state *is* a replay) and
buffers it. When the buffer reaches the log depends on the mode, as the
pattern article defines them:

* ``sync``: :meth:`flush` appends and waits until the batch is durable, so a
  step boundary is on disk before the next step starts.
* ``async``: :meth:`flush` hands the batch to a background task that appends
  batches in order while the next step runs. :meth:`sync_point` (used before
  a side effect) waits until everything emitted so far is durable.
* ``exit``: nothing is written until :meth:`close` (the run completed,
  failed or parked): no mid-run recovery, the cheapest mode.

Snapshots follow the :class:`SnapshotPolicy`; a snapshot is saved only after
the events it covers are in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Literal

import structlog

from agentlog._logging import get_logger
from agentlog.errors import ConfigError
from agentlog.eventlog.base import EventLog
from agentlog.eventlog.codec import encode_payload
from agentlog.eventlog.events import Event, EventData, utcnow
from agentlog.projector.fold import apply
from agentlog.projector.snapshots import SnapshotPolicy, save_state
from agentlog.projector.state import RunState

__all__ = ["DURABILITY_MODES", "Durability", "RunWriter"]

Durability = Literal["sync", "async", "exit"]
DURABILITY_MODES: tuple[str, ...] = ("sync", "async", "exit")

log = get_logger("agentlog.runtime")

# A queue item: a batch of events, or a state to snapshot once they are in.
_Item = list[Event] | RunState


class RunWriter:
    """Assigns seqs, keeps the live state, and writes per the durability mode."""

    def __init__(
        self,
        event_log: EventLog,
        state: RunState,
        *,
        epoch: int,
        durability: str,
        snapshots: SnapshotPolicy,
    ) -> None:
        if durability not in DURABILITY_MODES:
            raise ConfigError(
                f"durability must be one of {', '.join(DURABILITY_MODES)}, got {durability!r}"
            )
        self.log, self.state, self.epoch = event_log, state, epoch
        self.durability = durability
        self.snapshots = snapshots
        self._last_snapshot_seq = state.seq
        self._buffer: list[Event] = []
        self._lock = asyncio.Lock()
        self._queue: asyncio.Queue[_Item] | None = None
        self._background: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._pending_snapshot: RunState | None = None
        if durability == "async":
            self._queue = asyncio.Queue()
            self._background = asyncio.create_task(self._drain_forever())

    def emit(self, data: EventData) -> Event:
        """Record ``data`` as the run's next event (buffered per the mode).

        Raises:
            NotSerializableError: the payload cannot be stored; nothing changes.
            FencedError and other log errors from an earlier background write.
        """
        self._raise_failure()
        encode_payload(data)  # refuse bad payloads before the live state changes
        event = Event(self.state.run_id, self.state.seq + 1, data, utcnow(), self.epoch)
        apply(self.state, event)
        self._buffer.append(event)
        structlog.contextvars.bind_contextvars(seq=event.seq)
        if self.snapshots.due(self.state, self._last_snapshot_seq):
            self._last_snapshot_seq = self.state.seq
            self._pending_snapshot = self.state.copy()
        return event

    async def flush(self) -> None:
        """End of a unit of work: write what is buffered, per the mode."""
        self._raise_failure()
        if self.durability == "exit":
            return
        if self._queue is not None:
            if self._buffer:
                self._queue.put_nowait(self._take())
            snapshot = self._take_snapshot()
            if snapshot is not None:
                self._queue.put_nowait(snapshot)
            return
        async with self._lock:  # batches reach the log in seq order
            await self._write_now()

    async def sync_point(self) -> None:
        """Return only when everything emitted so far is durable (not in exit mode)."""
        await self.flush()
        if self._queue is not None:
            await self._queue.join()
            self._raise_failure()

    async def close(self) -> None:
        """Write everything still buffered (all modes) and stop the background task."""
        try:
            if self._queue is not None:
                await self.sync_point()
            async with self._lock:
                await self._write_now()
        finally:
            if self._background is not None:
                self._background.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._background

    def abandon(self) -> None:
        """Drop what is not written yet (the writer was fenced or cancelled)."""
        self._buffer.clear()
        if self._background is not None:
            self._background.cancel()

    # -- internals -----------------------------------------------------------------

    def _take(self) -> list[Event]:
        batch, self._buffer = self._buffer, []
        return batch

    def _take_snapshot(self) -> RunState | None:
        snapshot, self._pending_snapshot = self._pending_snapshot, None
        return snapshot

    async def _write_now(self) -> None:
        snapshot = self._take_snapshot()
        await self._write_items([self._take()] if snapshot is None else [self._take(), snapshot])

    async def _drain_forever(self) -> None:
        assert self._queue is not None
        while True:
            items = [await self._queue.get()]
            while not self._queue.empty():  # group commit: one append for all waiting
                items.append(self._queue.get_nowait())
            try:
                if self._failure is None:
                    await self._write_items(items)
            except Exception as exc:  # surfaced on the next emit/flush
                self._failure = exc
                log.warning("background write failed", error=str(exc))
            finally:
                for _ in items:
                    self._queue.task_done()

    async def _write_items(self, items: list[_Item]) -> None:
        batch: list[Event] = []
        for item in [*items, RunState()]:  # the sentinel flushes the last batch
            if isinstance(item, list):
                batch.extend(item)
                continue
            if batch:
                await self.log.append(batch, durable=True)
                batch = []
            if item.run_id:
                await save_state(self.log, item)

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure
