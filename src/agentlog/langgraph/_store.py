"""The threads' events: loading, caching, fenced appends and snapshots.

Runs on the saver's loop thread, but for a sync ``get_tuple`` of a thread
this store holds, served on the caller's thread when the log can tell, there
and then, that nothing was appended since (:meth:`ThreadStore.serve_here`),
and a sync put or put_writes of such a thread, appended and committed on the
caller's thread when the log can commit there now
(:meth:`ThreadStore.append_here`). The cache is guarded for them
(:mod:`agentlog.langgraph._locks`): the loop marks a thread busy while it
holds the thread's lock, a caller's thread works on a thread only while no
one else does, and the two never touch one thread at once. Each thread is
one agentlog run (run id = thread id). A thread is read once (latest
snapshot + the events after it) and then kept in memory; every read checks
for events appended since (one cheap query), so another process's
checkpoints are seen.

Writing is fenced, and a saver never appends on top of anything it did not
serve to LangGraph. LangGraph reads a namespace's checkpoint (``get_tuple``
when an ``invoke`` starts) and then writes its successors from what it read;
so the store remembers, per namespace, the seq it served, and a write whose
namespace was served before the latest event another writer appended is a
:class:`~agentlog.errors.ThreadConflictError`: nothing is appended, and the
namespace stays refused until LangGraph reads it again (the next ``invoke``).
A failed write refuses every namespace of the thread the same way, because
LangGraph goes on (its background futures put the step's checkpoint after
a failed ``put_writes``) and that checkpoint would fork the thread.

Every append names the next seq this process expects, so if another
process wrote meanwhile (or claimed the thread since), the append fails and
nothing is written. After its first write to a thread this process claims
the run's writer epoch, which fences every older writer at once, with no
lease to wait out after a crash. It claims after that write, not before: the
first batch is appended under the epoch in force, conditional on its seq, so
of two processes that read the same checkpoint exactly one wins, and a late
claim never fences a writer that is ahead of it. A thread that had no run
when it was read has no writer to fence: its first batch goes in under epoch
0, conditional on seq 1, and nothing is claimed, so a new thread's first
save is one commit (a later writer's claim fences this process).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from agentlog._logging import get_logger
from agentlog.errors import (
    AgentlogError,
    ConflictError,
    EventLogError,
    FencedError,
    RunArchivedError,
    ThreadConflictError,
    UnknownRunError,
)
from agentlog.eventlog._base import EventLog
from agentlog.eventlog._indexed import IndexedEventLog
from agentlog.eventlog.events import (
    LANGGRAPH_WORKFLOW,
    CheckpointsRemoved,
    Event,
    EventData,
)
from agentlog.langgraph import _snapshot
from agentlog.langgraph._batch import STALE, fold_in, next_events, refused_because
from agentlog.langgraph._convert import Heads
from agentlog.langgraph._locks import ThreadLock, ThreadLocks
from agentlog.langgraph._thread import NeedsHistory, ThreadModel

__all__ = ["NotHere", "ThreadStore"]

_log = get_logger("agentlog.langgraph")

_T = TypeVar("_T")


class NotHere(LookupError):
    """A read the caller's thread cannot serve: run it on the saver's loop."""


@dataclass
class _Thread:
    model: ThreadModel
    epoch: int | None = None
    snapshot_seq: int = 0
    #: The snapshot chain this writer continues (None: the next one is a base).
    chain: _snapshot.Chain | None = None
    #: (ns, channel) -> (version, value): the decoded list value of the newest
    #: version seen, kept private so that the next append can be a delta.
    heads: dict[tuple[str, str], tuple[object, list[object]]] = field(default_factory=dict)
    #: ns -> the seq of the thread's head when LangGraph last read that namespace.
    served: dict[str, int] = field(default_factory=dict)
    #: The seq of the thread's head at its last read of any kind: what a
    #: namespace never read (a direct ``put``) counts as served at; -1 refuses it.
    read_seq: int = 0
    #: The newest seq that this store did not append itself (another writer's
    #: event, or the head when a write failed): a namespace served before it is stale.
    foreign_seq: int = 0
    #: The log had no run for the thread when it was last read: no writer
    #: holds it, so its first write needs no claim (see :meth:`ThreadStore.append`).
    absent: bool = False

    def serve(self, namespaces: Sequence[str] | None = None) -> None:
        """Record that LangGraph was given the thread as it stands (``None``: every namespace)."""
        seq = self.model.seq
        self.read_seq = seq
        for ns in self.model.checkpoints if namespaces is None else namespaces:
            self.served[ns] = seq

    def stale(self, ns: str) -> bool:
        """True if ``ns`` was served before the newest event this store did not write."""
        return self.served.get(ns, self.read_seq) < self.foreign_seq

    def refuse(self) -> None:
        """After a failed write: refuse every namespace until it is read again."""
        self.foreign_seq = self.model.seq
        self.served.clear()
        self.read_seq = -1
        self.epoch = None  # fenced or beaten: claim again after the next read
        self.absent = False  # whoever beat us wrote or claimed it
        self.chain = None  # another writer's snapshots may follow ours
        self.heads.clear()  # they may hold values of the checkpoint that was not stored


class ThreadStore:
    """Threads of one EventLog, cached, with fenced appends."""

    def __init__(self, log: EventLog, *, snapshot_every: int, base_every: int = 16) -> None:
        self.log = log
        self.snapshot_every = snapshot_every
        self.base_every = base_every
        self.owner = f"{socket.gethostname()}:{os.getpid()}:langgraph"
        self._threads: dict[str, _Thread] = {}
        self._locks = ThreadLocks()
        #: Held by a read on a caller's thread, and to mark a thread busy (see _locks).
        self._guard = self._locks.guard
        self._busy = self._locks.busy
        #: The run's last seq read on the calling thread (None: no run), if the log can.
        self._last_seq_here: Callable[[str], int | None] | None = getattr(
            log, "last_seq_here", None
        )
        #: Commits an append on the calling thread if the log is idle (see append_here).
        self._append_here: Callable[[Callable[[], list[Event]]], bool] | None = getattr(
            log, "append_here", None
        )

    def lock(self, thread_id: str) -> ThreadLock:
        """The thread's lock on the loop: LangGraph calls put and put_writes from
        several threads at once, and one thread's reads and appends must not
        interleave. While it is held the thread is busy: no caller's thread
        touches it."""
        return self._locks.lock(thread_id)

    def serve_here(
        self,
        thread_id: str,
        ns: str,
        build: Callable[[ThreadModel, Heads], _T],
        *,
        cold: bool = False,
    ) -> _T:
        """``build`` of the thread on the calling thread, served as :meth:`serve` serves it.

        Only for a thread this store holds, that the loop is not working on,
        and whose run's last seq (read on this thread) is the model's: nothing
        to catch up with, so the cached model is the thread as it stands.
        With ``cold``, a thread not held yet is read here, in one statement
        (:func:`_load_here`), with no event loop.

        Raises:
            NotHere: any other case, or ``build`` raised NeedsHistory; run the
                read on the loop (nothing was changed).
        """
        last_seq_here = self._last_seq_here
        if last_seq_here is None:
            raise NotHere(thread_id)
        with self._guard:
            state = self._threads.get(thread_id)
            if thread_id in self._busy:
                raise NotHere(thread_id)
            if state is None:
                if not cold:
                    raise NotHere(thread_id)
                state = self._threads[thread_id] = _load_here(self.log, thread_id)
            elif not _current(state, last_seq_here(thread_id)):
                raise NotHere(thread_id)
            try:
                built = build(state.model, state.heads)
            except NeedsHistory:
                raise NotHere(thread_id) from None
            state.absent = False
            state.serve([ns])
            return built

    async def thread(self, thread_id: str, *, refresh: bool = True) -> _Thread:
        """The thread, read on first use; with ``refresh``, caught up with the log."""
        cached = self._threads.get(thread_id)
        if cached is None:
            cached = self._threads[thread_id] = await self._load(thread_id)
        elif refresh:
            await self._catch_up(cached)
        return cached

    async def serve(self, thread_id: str, namespaces: Sequence[str] | None = None) -> _Thread:
        """The thread caught up with the log, as LangGraph is about to be given it."""
        state = await self.thread(thread_id)
        state.serve(namespaces)
        return state

    def heads(self, thread_id: str) -> dict[tuple[str, str], tuple[object, list[object]]]:
        """The private head values of a loaded thread (empty if not loaded)."""
        cached = self._threads.get(thread_id)
        return cached.heads if cached is not None else {}

    async def _load(self, thread_id: str) -> _Thread:
        """The latest snapshot (and its chain) plus the events after it; all events
        if there is no snapshot of ours that can be trusted."""
        state: _Thread | None = None
        snapshot = await self.log.load_snapshot(thread_id)
        if snapshot is not None:
            loaded = await _snapshot.load(self.log, snapshot)
            if loaded is not None:
                state = _Thread(loaded[0], chain=loaded[1], snapshot_seq=snapshot.seq)
        if state is None:
            state = _Thread(ThreadModel(thread_id))
        await self._catch_up(state)
        state.read_seq = state.foreign_seq = state.model.seq
        return state

    async def _catch_up(self, state: _Thread) -> None:
        """Fold in what other writers appended since (all of it is foreign)."""
        model = state.model
        try:
            async for event in self.log.read(model.thread_id, after_seq=model.seq):
                model.apply(event)
                if isinstance(event.data, CheckpointsRemoved) and event.data.everything:
                    state.heads.clear()
                state.foreign_seq = event.seq
        except RunArchivedError:
            raise
        except UnknownRunError:
            if model.seq:
                raise
            state.absent = True  # never written: an empty thread
        else:
            state.absent = False
        await self._settle(state)

    async def _settle(self, state: _Thread) -> None:
        """After a removal hit a model that is not complete, fold the whole thread."""
        if state.model.needs_history:
            state.model = await self._fold(state.model.thread_id, state.model.seq)

    async def _fold(self, thread_id: str, upto_seq: int) -> ThreadModel:
        model = ThreadModel(thread_id)
        if upto_seq:
            async for event in self.log.read(thread_id, upto_seq=upto_seq):
                model.apply(event)
        return model

    async def history(self, state: _Thread) -> ThreadModel:
        """Every live checkpoint of the thread (as of its model's seq), folded
        from all its events unless the model is already complete.

        For ``list`` and reads of old checkpoints, which are history-sized
        by nature; the latest checkpoints never need it.
        """
        if state.model.complete:
            return state.model
        return await self._fold(state.model.thread_id, state.model.seq)

    async def append(
        self, thread_id: str, items: Sequence[EventData], *, served_ns: str | None = None
    ) -> None:
        """Append ``items`` to the thread's run, fenced, all or nothing.

        Args:
            served_ns: the namespace whose served checkpoint the items build
                on (a put or put_writes); refused if another writer appended
                since it was served. None for an operation that read the
                thread itself just now, under the thread's lock.

        Raises:
            ThreadConflictError: another process wrote or claimed the thread
                since this one read it; nothing was written.
        """
        state = await self.thread(thread_id, refresh=False)
        if served_ns is not None and state.stale(served_ns):
            state.refuse()
            raise ThreadConflictError(thread_id, STALE)
        claim_after = False
        if state.epoch is None and state.absent and served_ns is not None:
            # A new thread, as LangGraph was served it: its first batch goes in
            # under epoch 0, which no run has claimed, conditional on seq 1, so
            # of two processes that create it exactly one wins. No claim: one
            # commit, not two, and any process that writes the thread later
            # claims a newer epoch, which fences this one.
            state.epoch = 0
        elif state.epoch is None:
            await self._catch_up(state)
            if served_ns is not None and state.stale(served_ns):
                state.refuse()
                raise ThreadConflictError(thread_id, STALE)
            if state.model.seq == 0:
                state.epoch = await self.log.claim_writer(thread_id, owner=self.owner, force=True)
            else:
                # A claim would fence a writer that appended between our read
                # and our claim, though it is ahead of us. So the first batch
                # goes in under the epoch in force, conditional on the seq (the
                # log's own compare-and-swap: exactly one of two racers gets
                # it), and the winner claims only then.
                info = await self.log.find_run(thread_id)
                state.epoch, claim_after = (info.writer_epoch if info else 0), True
        await self._write(state, items)
        if claim_after:
            state.epoch = await self.log.claim_writer(thread_id, owner=self.owner, force=True)
        if self._due(state):
            await self._snapshot(state)

    async def _write(self, state: _Thread, items: Sequence[EventData]) -> None:
        """Append ``items`` under ``state.epoch`` at the next seq and fold them in."""
        events = next_events(state.model, state.epoch, items)
        try:
            await self.log.append(events, durable=True)
        except (ConflictError, FencedError) as exc:
            state.refuse()
            raise ThreadConflictError(state.model.thread_id, refused_because(exc)) from exc
        state.absent = False
        fold_in(state.model, state.heads, events)
        await self._settle(state)

    def append_here(
        self, thread_id: str, served_ns: str, build: Callable[[ThreadModel, Heads], EventData]
    ) -> bool:
        """:meth:`append` of what ``build`` makes of the thread, on the calling
        thread with no event loop: a sync put or put_writes.

        Only for a thread this store holds and has written to (no claim to
        make), that no one else works on, on a log that can commit on this
        thread now (SQLite's ``append_here``: no append waiting, its worker
        thread idle). ``build`` makes the item of the model and heads once the
        thread is held and the log's connection taken; it raises NotHere (or
        NeedsHistory) to leave the put to the loop.

        Returns:
            True if the loop has work left on the thread (a snapshot is due):
            call :meth:`follow_up`. The append is recorded either way.

        Raises:
            NotHere: any other case (nothing written): run it on the loop.
            ThreadConflictError: as :meth:`append`.
        """
        append_here = self._append_here
        if append_here is None:
            raise NotHere(thread_id)
        with self._locks.hold_here(thread_id):
            state = self._threads.get(thread_id)
            # A new thread's first batch needs no claim either (see append).
            epoch = None if state is None else state.epoch
            if epoch is None and state is not None and state.absent:
                epoch = 0
            if state is None or epoch is None:
                raise NotHere(thread_id)
            if state.stale(served_ns):
                state.refuse()
                raise ThreadConflictError(thread_id, STALE)
            made: list[Event] = []

            def events() -> list[Event]:
                try:
                    item = build(state.model, state.heads)
                except NeedsHistory:  # an older checkpoint's blob: the loop folds the thread
                    raise NotHere(thread_id) from None
                made[:] = next_events(state.model, epoch, [item])
                return made

            try:
                if not append_here(events):
                    raise NotHere(thread_id)
            except (ConflictError, FencedError) as exc:
                state.refuse()
                raise ThreadConflictError(thread_id, refused_because(exc)) from exc
            state.epoch, state.absent = epoch, False
            fold_in(state.model, state.heads, made)
            return state.model.needs_history or self._due(state)

    async def follow_up(self, thread_id: str) -> None:
        """After :meth:`append_here` said so: fold and snapshot the thread as
        :meth:`append` does after its write, if still due."""
        async with self.lock(thread_id):
            state = self._threads.get(thread_id)
            if state is not None:
                await self._settle(state)
                if self._due(state):
                    await self._snapshot(state)

    def _due(self, state: _Thread) -> bool:
        """True if the thread's next snapshot is due."""
        return state.model.seq - state.snapshot_seq >= self.snapshot_every

    async def _snapshot(self, state: _Thread) -> None:
        """Save the next snapshot of the writer's chain, then keep only what it holds."""
        model = state.model
        try:
            snapshot, chain = _snapshot.encode(model, state.chain, self.base_every)
        except NeedsHistory:
            # The model lacks a blob (a fork from a checkpoint older than its
            # snapshot): fold the thread once, and snapshot that.
            state.model = model = await self._fold(model.thread_id, model.seq)
            snapshot, chain = _snapshot.encode(model, state.chain, self.base_every)
        try:
            await self.log.save_snapshot(snapshot)
        except EventLogError as exc:
            # A snapshot is a cache of the events, which are recorded: the put
            # stands, and the next snapshot stands alone.
            state.chain = None
            _log.warning("thread snapshot not saved", run_id=model.thread_id, reason=str(exc))
            return
        state.chain, state.snapshot_seq = chain, model.seq
        model.trim()

    async def thread_ids(self) -> list[str]:
        """Every run of the log that is a LangGraph thread."""
        runs = await self.log.list_runs()
        return [info.run_id for info in runs if info.workflow == LANGGRAPH_WORKFLOW]


def _current(state: _Thread, last_seq: int | None) -> bool:
    """True if a held thread is the thread as it stands: the run's last seq
    (``last_seq``) is its model's, and its model answers without the history."""
    return bool(state.model.seq) and last_seq == state.model.seq and not state.model.needs_history


def _load_here(log: EventLog, thread_id: str) -> _Thread:
    """:meth:`ThreadStore._load` on the calling thread, with no event loop: the
    newest snapshot, its chain and the events after it in one read
    (:meth:`~agentlog.eventlog._indexed.IndexedEventLog.cold_read`).

    Raises:
        NotHere: the log cannot, the thread has no run (a new thread) or
            more events after its snapshot than one batch, or anything is out
            of the ordinary (a snapshot that is not good, a row that does not
            decode, a removal that needs the history): the loop reads it the
            usual way, which says what is wrong.
    """
    if not isinstance(log, IndexedEventLog):
        raise NotHere(thread_id)
    cold = log.cold_read(thread_id)
    if cold is None or not cold.complete:
        raise NotHere(thread_id)
    if cold.snapshots:
        loaded = _snapshot.load_fetched(cold)
        if loaded is None:
            raise NotHere(thread_id)
        state = _Thread(loaded[0], chain=loaded[1], snapshot_seq=cold.snapshots[0].seq)
    else:
        state = _Thread(ThreadModel(thread_id))
    events = log.cold_events(thread_id, cold)
    if events is None:
        raise NotHere(thread_id)
    model = state.model
    try:
        for event in events:
            model.apply(event)
            if isinstance(event.data, CheckpointsRemoved) and event.data.everything:
                state.heads.clear()
    except AgentlogError:  # a sealed event: the loop's read raises it
        raise NotHere(thread_id) from None
    if model.needs_history or not model.seq:
        raise NotHere(thread_id)
    state.read_seq = state.foreign_seq = model.seq
    return state
