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
* ``exit``: nothing the run produces is written until :meth:`close` (the
  run completed, failed or parked): no mid-run recovery, the cheapest mode.

In every mode, an input from outside the run (its start, an answer, a retry,
a timer that fired) is made durable by :meth:`persist` before the run acts
on it: a crash must never take back a decision an effect already acted on.

A failed write is sticky: once an append fails, every later flush, sync
point and emit of this writer raises that failure. A waiter whose events
were taken by the failed append must never return as if they were durable.

Before a side effect, :meth:`check_live` also refuses to go on when this
writer was fenced (the heartbeat saw a newer epoch) or when its lease ran
out by its own monotonic clock (the process was paused): another process may
own the run by then. In ``exit`` mode, which appends no intent first,
:meth:`confirm_epoch` also asks the log for the run's current epoch. The
last :meth:`check_live` runs in :meth:`run_effect`, in the thread or task
that calls the effect, with nothing awaited in between, so a pause before
it (SIGSTOP, a wait for a free thread) is seen. A pause between that check
and the call itself is covered only by the task's idempotency key.

Snapshots follow the :class:`SnapshotPolicy`; a snapshot is saved only after
the events it covers are in the log. Snapshots are a cache: a failed save is
logged and the run goes on; the next one is tried after ``every`` more events.
They form a :class:`SnapshotChain` (each stores only what append-only lists
gained since the one before), so a snapshot that is dropped unsaved or fails
to save restarts the chain: the next one stands alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Literal

from agentlog._logging import get_logger
from agentlog.errors import BackendUnavailableError, ConfigError, FencedError, LeaseExpiredError
from agentlog.eventlog._base import EventLog, Snapshot
from agentlog.eventlog.codec import decode_payload, encode_payload
from agentlog.eventlog.events import SCHEMA_V, Event, EventData, utcnow
from agentlog.projector._fold import apply
from agentlog.projector._reducers import Reducer
from agentlog.projector._snapshots import SnapshotChain, SnapshotPolicy
from agentlog.projector._state import RunState
from agentlog.runtime._callables import is_async_callable
from agentlog.runtime._cancelling import task_cancelling

__all__ = ["DURABILITY_MODES", "Durability", "RunWriter", "check_durability"]

Durability = Literal["sync", "async", "exit"]
DURABILITY_MODES: tuple[str, ...] = ("sync", "async", "exit")


def check_durability(mode: str) -> None:
    """Raise ConfigError unless ``mode`` is one of :data:`DURABILITY_MODES`."""
    if mode not in DURABILITY_MODES:
        raise ConfigError(f"durability must be one of {', '.join(DURABILITY_MODES)}, got {mode!r}")


_log = get_logger("agentlog.runtime")

# A queue item: a batch of events, or a state to snapshot once they are in.
_Item = list[Event] | Snapshot


class RunWriter:
    """The live :class:`~agentlog.runtime._writer_protocol.Writer`: assigns seqs,
    keeps the live state, and writes per the durability mode."""

    def __init__(
        self,
        log: EventLog,
        state: RunState,
        *,
        epoch: int,
        durability: str,
        snapshots: SnapshotPolicy,
        lease_deadline: float | None = None,
        reducers: Mapping[str, Reducer] | None = None,
    ) -> None:
        check_durability(durability)
        self.log, self.state, self.epoch = log, state, epoch
        self.durability = durability
        self.snapshots = snapshots
        self._last_snapshot_seq = state.seq
        self._buffer: list[Event] = []
        self._lock = asyncio.Lock()
        self._queue: asyncio.Queue[_Item] | None = None
        self._background: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._pending_snapshot: Snapshot | None = None
        self._chain = SnapshotChain(snapshots.base_every)
        #: time.monotonic() after which this writer's lease may have expired
        self._lease_deadline = lease_deadline
        self._reducers = reducers  # the workflow's own reducer table
        self._log = _log.bind(run_id=state.run_id, epoch=epoch)
        #: Told of each event emitted (the driver's telemetry: runtime/_telemetry.py).
        self.observe: Callable[[RunState, EventData], None] | None = None
        if durability == "async":
            self._queue = asyncio.Queue()
            self._background = asyncio.create_task(self._drain_forever())

    def emit(self, data: EventData, *, at: datetime | None = None) -> Event:
        """Record ``data`` as the run's next event (buffered per the mode);
        ``at``: its time when not now (a queue grant's, for ``RunAdmitted``).

        Raises:
            NotSerializableError: the payload cannot be stored; nothing changes.
            FencedError and other log errors from an earlier background write.
        """
        self._raise_failure()
        raw = encode_payload(data)  # refuse bad payloads before the live state changes
        # The live state folds what a replay will read back: a tuple becomes a
        # list, a datetime becomes UTC, a view becomes a plain dict or list.
        data = decode_payload(data.type, SCHEMA_V, raw, run_id=self.state.run_id)
        event = Event(self.state.run_id, self.state.seq + 1, data, at or utcnow(), self.epoch)
        object.__setattr__(event, "packed", raw)  # the log stores these bytes: packed once
        apply(self.state, event, self._reducers)
        self._buffer.append(event)
        if self.observe is not None:
            self.observe(self.state, data)
        if self.snapshots.due(self.state, self._last_snapshot_seq):
            self._last_snapshot_seq = self.state.seq
            if self._pending_snapshot is not None:  # replaced unsaved (exit mode)
                self._chain.restart()
            # Encoded now (msgpack, fast), not deep-copied: the live state moves on.
            self._pending_snapshot = self._encode_snapshot()
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
        await self._write_through()

    async def sync_point(self) -> None:
        """Return only when everything emitted so far is durable (not in exit mode)."""
        await self.flush()
        if self._queue is not None:
            await self._queue.join()
            self._raise_failure()

    async def persist(self) -> None:
        """Return only when everything emitted so far is durable, in every mode.

        For what comes from outside the run (its start, an answer, a retry, a
        timer that fired): the run must not act on an input that a crash
        could take back, even in ``exit`` mode.
        """
        if self._queue is not None:
            await self.sync_point()
            return
        await self._write_through()

    async def confirm_epoch(self) -> None:
        """In ``exit`` mode, ask the log whether this writer still owns the run.

        Sync and async modes append the effect's intent first, and an append
        from a fenced epoch fails. ``exit`` mode appends nothing before an
        effect, so without this a writer taken over between two heartbeats
        (its lease not yet run out by its own clock) would run the effect
        after the new writer recorded its result.

        Raises:
            FencedError: the run's writer epoch is newer than this one.
        """
        if self.durability != "exit":
            return
        info = await self.log.find_run(self.state.run_id)
        current = info.writer_epoch if info is not None else self.epoch
        if current != self.epoch:
            self.fence(FencedError(self.state.run_id, self.epoch, current))
            self._raise_failure()

    async def run_effect(
        self, key: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Run the effect of task ``key`` (its intent is on record): call its
        function, an async one awaited, a sync one in a worker thread, checking
        :meth:`check_live` last where the call happens.

        The one place a task's body runs (a replay's writer, see
        :mod:`agentlog.replay`, returns the recorded outcome instead). The
        check before it (in :class:`StepContext`) is not enough: a process
        paused between that check and the call (or an effect queued for a
        free thread) would begin the effect after another writer took the run
        over and recorded its result.

        Raises:
            FencedError, LeaseExpiredError: as :meth:`check_live`; ``fn`` was
                not called.
        """
        if is_async_callable(fn):
            self.check_live()
            return await fn(*args, **kwargs)
        return await asyncio.to_thread(self._checked_call, fn, args, kwargs)  # sees the key too

    def _checked_call(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        self.check_live()  # in the effect's own thread, just before the call
        return fn(*args, **kwargs)

    async def backoff(self, seconds: float) -> None:
        """Wait ``seconds`` before a retry (a replay's writer does not wait)."""
        await asyncio.sleep(seconds)

    def upcoming(self, superstep: int, branch: int) -> list[EventData]:
        """Nothing: the live state holds everything the run recorded."""
        return []

    def check_live(self) -> None:
        """Raise unless this writer may begin a side effect now.

        Raises:
            FencedError: a newer writer owns the run (seen by a failed write
                or by the lease heartbeat).
            LeaseExpiredError: the lease ran out by this process's own clock.
            Any earlier write failure.
        """
        self._raise_failure()
        if self._lease_deadline is not None:
            overdue = time.monotonic() - self._lease_deadline
            if overdue >= 0:
                raise LeaseExpiredError(self.state.run_id, self.epoch, overdue)

    def lease_renewed(self, sent_at: float, lease_seconds: float) -> None:
        """A renewal sent at ``sent_at`` (monotonic) succeeded."""
        if self._lease_deadline is not None:
            self._lease_deadline = max(self._lease_deadline, sent_at + lease_seconds)

    def fence(self, error: BaseException) -> None:
        """Stop this writer: every later write and side effect raises ``error``."""
        if self._failure is None:
            self._failure = error

    async def close(self) -> None:
        """Write everything still buffered (all modes) and stop the background task."""
        try:
            if self._queue is not None:
                await self.sync_point()
            await self._write_through()
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

    async def _write_through(self) -> None:
        """Write what is buffered now, whatever the mode; batches reach the log in
        seq order. A write that failed while this caller waited for the lock may
        have taken its events with it: fail too, never return as if durable."""
        async with self._lock:
            self._raise_failure()
            await self._write_now()

    def _take(self) -> list[Event]:
        batch, self._buffer = self._buffer, []
        return batch

    def _encode_snapshot(self) -> Snapshot | None:
        try:
            return self._chain.encode(self.state)
        except Exception as exc:  # a cache: a state it cannot encode is not a failed run
            self._chain.restart()
            self._log.warning("snapshot skipped", seq=self.state.seq, error=str(exc))
            return None

    def _take_snapshot(self) -> Snapshot | None:
        snapshot, self._pending_snapshot = self._pending_snapshot, None
        return snapshot

    async def _write_now(self) -> None:
        snapshot = self._take_snapshot()
        await self._write_items([self._take()] if snapshot is None else [self._take(), snapshot])

    async def _drain_forever(self) -> None:
        assert self._queue is not None
        while not task_cancelling():  # a cancel a backend swallowed still stops it
            items = [await self._queue.get()]
            while not self._queue.empty():  # group commit: one append for all waiting
                items.append(self._queue.get_nowait())
            try:
                if self._failure is None:
                    await self._write_items(items)
            except Exception:  # recorded by _write_items, surfaced on the next emit/flush
                pass
            finally:
                for _ in items:
                    self._queue.task_done()

    async def _write_items(self, items: list[_Item]) -> None:
        batch: list[Event] = []
        for item in [*items, None]:  # the sentinel flushes the last batch
            if isinstance(item, list):
                batch.extend(item)
                continue
            if batch:
                await self._append(batch)
                batch = []
            if item is not None:
                await self._save_snapshot(item)

    async def _append(self, batch: list[Event]) -> None:
        try:
            await self.log.append(batch, durable=True)
        except Exception as exc:
            self._failure = exc
            self._log.warning("write failed; the writer stops", error=str(exc))
            raise
        except asyncio.CancelledError:
            # Whether the batch landed is unknown: nothing may go on as if it had.
            self._failure = BackendUnavailableError(
                f"run {self.state.run_id!r}: a write was interrupted before it was confirmed"
            )
            raise

    async def _save_snapshot(self, snapshot: Snapshot) -> None:
        try:
            await self.log.save_snapshot(snapshot)
        except Exception as exc:  # a cache: the events are the truth
            self._chain.restart()  # the next snapshot must not build on this one
            self._log.warning(
                "snapshot save failed; the run goes on", seq=snapshot.seq, error=str(exc)
            )

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure
