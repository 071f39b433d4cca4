"""The threads' events: loading, caching, fenced appends and snapshots.

Runs only on the saver's loop thread. Each thread is one agentlog run (run
id = thread id). A thread is read once (latest snapshot + the events after
it) and then kept in memory; every read checks for events appended since
(one cheap query), so another process's checkpoints are seen.

Writing is fenced: the first write of this process to a thread claims the
run's writer epoch (after reading the thread), which fences every older
writer at once, with no lease to wait out after a crash. Every append names
the next seq this process expects, so if another process wrote meanwhile
(or claimed the thread since), the append fails, nothing is written, and
:class:`~agentlog.errors.ThreadConflictError` says so.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field

from agentlog._logging import get_logger
from agentlog.errors import (
    ConflictError,
    FencedError,
    RunArchivedError,
    ThreadConflictError,
    UnknownRunError,
)
from agentlog.eventlog.base import EventLog, Snapshot
from agentlog.eventlog.events import CheckpointsRemoved, Event, EventData, RunStarted, utcnow
from agentlog.langgraph._thread import ThreadModel

__all__ = ["THREAD_WORKFLOW", "ThreadStore"]

log = get_logger("agentlog.langgraph")

#: The workflow name in a thread's RunStarted, which marks a run as a LangGraph thread.
THREAD_WORKFLOW = "langgraph"


@dataclass
class _Thread:
    model: ThreadModel
    epoch: int | None = None
    snapshot_seq: int = 0
    #: (ns, channel) -> (version, value): the decoded list value of the newest
    #: version seen, kept private so that the next append can be a delta.
    heads: dict[tuple[str, str], tuple[object, list[object]]] = field(default_factory=dict)


class ThreadStore:
    """Threads of one EventLog, cached, with fenced appends."""

    def __init__(self, event_log: EventLog, *, snapshot_every: int) -> None:
        self.log = event_log
        self.snapshot_every = snapshot_every
        self.owner = f"{socket.gethostname()}:{os.getpid()}:langgraph"
        self._threads: dict[str, _Thread] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def lock(self, thread_id: str) -> asyncio.Lock:
        """The thread's lock: LangGraph calls put and put_writes from several
        threads at once, and one thread's reads and appends must not interleave."""
        found = self._locks.get(thread_id)
        if found is None:
            found = self._locks[thread_id] = asyncio.Lock()
        return found

    async def thread(self, thread_id: str, *, refresh: bool = True) -> _Thread:
        """The thread, read on first use; with ``refresh``, caught up with the log."""
        cached = self._threads.get(thread_id)
        if cached is None:
            cached = self._threads[thread_id] = await self._load(thread_id)
        elif refresh:
            await self._catch_up(cached)
        return cached

    def heads(self, thread_id: str) -> dict[tuple[str, str], tuple[object, list[object]]]:
        """The private head values of a loaded thread (empty if not loaded)."""
        cached = self._threads.get(thread_id)
        return cached.heads if cached is not None else {}

    async def _load(self, thread_id: str) -> _Thread:
        model: ThreadModel | None = None
        snapshot = await self.log.load_snapshot(thread_id)
        if snapshot is not None:
            model = ThreadModel.decode(thread_id, snapshot.state)
            if model is None or model.seq != snapshot.seq:
                log.warning("thread snapshot ignored", run_id=thread_id, seq=snapshot.seq)
                model = None
        state = _Thread(model or ThreadModel(thread_id))
        state.snapshot_seq = state.model.seq
        await self._catch_up(state)
        return state

    async def _catch_up(self, state: _Thread) -> None:
        model = state.model
        try:
            async for event in self.log.read(model.thread_id, after_seq=model.seq):
                model.apply(event)
        except RunArchivedError:
            raise
        except UnknownRunError:
            if model.seq:
                raise
            # Never written: an empty thread.

    def forget(self, thread_id: str) -> None:
        """Drop what is cached of the thread (after a conflict)."""
        self._threads.pop(thread_id, None)

    async def append(self, thread_id: str, items: Sequence[EventData]) -> None:
        """Append ``items`` to the thread's run, fenced, all or nothing.

        Raises:
            ThreadConflictError: another process wrote or claimed the thread
                since this one read it; nothing was written.
        """
        state = await self.thread(thread_id, refresh=False)
        if state.epoch is None:
            await self._catch_up(state)  # read first, then fence the older writers
            state.epoch = await self.log.claim_writer(thread_id, owner=self.owner, force=True)
        model = state.model
        if model.seq == 0:
            items = [_thread_started(), *items]
        events = [
            Event(thread_id, model.seq + 1 + i, data, writer_epoch=state.epoch)
            for i, data in enumerate(items)
        ]
        try:
            await self.log.append(events, durable=True)
        except (ConflictError, FencedError) as exc:
            self.forget(thread_id)
            raise ThreadConflictError(thread_id, _why(exc)) from exc
        for event in events:
            model.apply(event)
            if isinstance(event.data, CheckpointsRemoved) and event.data.everything:
                state.heads.clear()
        if model.seq - state.snapshot_seq >= self.snapshot_every:
            await self._snapshot(state)

    async def _snapshot(self, state: _Thread) -> None:
        model = state.model
        await self.log.save_snapshot(Snapshot(model.thread_id, model.seq, model.encode(), utcnow()))
        state.snapshot_seq = model.seq

    async def thread_ids(self) -> list[str]:
        """Every run of the log that is a LangGraph thread."""
        runs = await self.log.list_runs()
        return [info.run_id for info in runs if info.workflow == THREAD_WORKFLOW]


def _thread_started() -> RunStarted:
    return RunStarted(
        workflow=THREAD_WORKFLOW,
        version="",
        input=None,
        durability="sync",
        fingerprint="",
    )


def _why(exc: Exception) -> str:
    if isinstance(exc, FencedError):
        return (
            f"another process claimed it (writer epoch {exc.current} fences this one's {exc.epoch})"
        )
    assert isinstance(exc, ConflictError)
    return f"another process appended to it (its next seq is {exc.expected}, not {exc.got})"
