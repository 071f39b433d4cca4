"""Group commit: appends made in one event loop iteration share one commit.

An append joins the open *group*; the append that opens it schedules the
group's commit one loop iteration later, so every append made in the same
iteration (the runs that the last commit resumed, each running its next
step) joins it, and one transaction and one fsync make all of them durable.
Nothing waits on a timer to fill a group: a lone append commits in the next
iteration. A lone append commits on the event loop's own thread when the
log's worker thread is idle: no hand-over to the thread and back (issue 23
item 6). A group of several goes to the worker thread, whose fsync then
overlaps with the other runs' steps (item 7). See :meth:`GroupCommit._flush`.

Inside the group's transaction each append is checked and written as before
(its run's next seq and current writer epoch), all checks before its first
write. The log remembers the run index row its last commit left for each run
it appends to, so a writer's next append does not read the row again: its
update of the row is conditional on the epoch and last seq it knows, and that
condition is the check, in the same transaction (see
``sqlite/_append_batch.py``);
only when another writer or log came in between is the row read. A batch of
up to :data:`ONE_STATEMENT_ROWS` rows is one multi-row INSERT, which SQLite
applies or refuses whole; a bigger one is written under its own SAVEPOINT,
in multi-row INSERTs of :data:`CHUNK_ROWS` rows. Either way a ConflictError
or FencedError leaves nothing of that append and fails only its caller; the
others in the group commit. If the transaction itself fails (the
disk is full, the file turned read-only, the write lock stayed busy) it is
rolled back whole and every caller of the group gets that typed error:
nothing of the group is recorded. A caller's await returns only after the
transaction holding its events committed.

Order is kept: any other call to the worker thread (a claim, a lease update,
a snapshot write, a long read's batches fetched ahead) seals the open group
first (queues its commit on the thread before the call), so an append never
overtakes a call submitted before it, nor a call an append submitted before
it.

Several event loops, on several threads, may share one log: a group may
hold appends of several loops, whichever loop commits it settles every
caller on its own loop (:func:`settle`), and the connection is used by one
thread at a time (:meth:`WorkerThread.hold_if_idle`, which never waits for
another loop's hold). Whether a group is queued on the worker thread is
decided under :attr:`GroupCommit._lock`, so it is queued once; the
loop that opened a group may stop before committing it, so an append from
another loop that joins it schedules its commit there too (:meth:`submit`).
The log's close() seals the groups for good (:meth:`seal` with ``closing``):
an append racing it from another thread either joined a group, which commits
before the connection closes (unless its commit on the loop met another
process's write lock while close() was already waiting for the connection:
then it is refused too), or is refused, having written nothing.

The small reads run on the caller's thread (``sqlite/_reader.py``): they
see every append that has returned, not one still waiting in an open group.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentlog._logging import get_logger
from agentlog.errors import BackendUnavailableError
from agentlog.eventlog._worker_thread import Outcome, WorkerThread, settle
from agentlog.eventlog.sqlite._append_batch import (
    CHUNK_ROWS,
    ONE_STATEMENT_ROWS,
    Batch,
    Known,
    apply_batches,
)
from agentlog.eventlog.sqlite._connection import SqliteConnection, WriteLockBusy

__all__ = ["CHUNK_ROWS", "ONE_STATEMENT_ROWS", "Batch", "GroupCommit", "PendingAppend"]

_log = get_logger(__name__)


@dataclass(slots=True, eq=False)
class PendingAppend(Batch):
    """A batch waiting for the group that will commit it, and who awaits it."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]


#: Run index rows the log remembers (the runs it appended to most recently).
KNOWN_RUNS = 4096


class GroupCommit:
    """Collects appends into groups and commits each group as one transaction.

    Args:
        connection: the log's connection, used by one thread at a time: the
            worker thread, or the event loop's thread while it holds it
            (:meth:`WorkerThread.hold_if_idle`).
        worker: the log's worker thread, which runs the calls in order.
    """

    #: A group of up to this many appends commits on the event loop's thread
    #: when the worker thread is idle; a bigger one on the worker thread (see
    #: :meth:`_flush`). 0 sends every group to the worker thread at once, as
    #: before session 32 (kept for benchmarks comparing the two).
    inline_max = 1

    def __init__(self, connection: SqliteConnection, worker: WorkerThread) -> None:
        self._connection = connection
        self._worker = worker
        # Taken by the event loop (submit, seal, flush) and by other loops' threads.
        self._lock = threading.Lock()
        self._open: list[PendingAppend] | None = None
        self._closed = False  # by seal(closing=True): no append joins a group after it
        self._queued: list[PendingAppend] | None = None  # the open group, if queued already
        # The loops that scheduled the open group's commit (see submit).
        self._flushing: asyncio.AbstractEventLoop | None = None
        self._joined: set[asyncio.AbstractEventLoop] = set()
        # The run index rows this log's commits left, newest last (used by
        # whichever thread holds the connection).
        self._known: dict[str, Known] = {}
        self.commits = 0
        """Groups committed so far (for benchmarks and tests: appends per fsync)."""
        self.appends = 0
        """Appends in those groups, each its caller's own success or error."""
        self.inline_commits = 0
        """Of :attr:`commits`, those made on an event loop's thread."""
        self.here_commits = 0
        """Of :attr:`commits`, those made by :meth:`commit_here` (no event loop)."""

    def submit(self, append: PendingAppend) -> None:
        """Add ``append`` to the open group, opening one if none is.

        A group is committed one event loop iteration after it opened (see
        :meth:`_flush`), so every append made in the same iteration (the runs
        that the last commit resumed) joins it. An append from another event
        loop (another thread's) that joins a group not queued yet schedules
        its commit on its own loop too, whichever runs first commits it: the
        loop that opened the group may stop before its next iteration, and
        the group would then wait for it with every later append in it.

        Raises:
            BackendUnavailableError: the log is closing (:meth:`seal` with
                ``closing``); nothing of ``append`` is written.
        """
        loop = append.loop
        with self._lock:
            if self._closed:  # decided under the lock the closing seal takes
                raise self._connection.closed_error()
            group = self._open
            if group is None:
                group = self._open = [append]
                self._flushing = loop
                if self._joined:
                    self._joined.clear()
                # Decided and marked here, under the lock: a seal() from
                # another thread meanwhile must not queue the group too.
                queue = not self.inline_max or self._worker.busy
                if queue:  # the thread is busy (many runs): see _flush
                    self._queued = group
                flush = not queue
            else:
                group.append(append)
                queue = False
                flush = (
                    loop is not self._flushing
                    and group is not self._queued
                    and loop not in self._joined
                )
                if flush:
                    self._joined.add(loop)
        if flush:
            loop.call_soon(self._flush, group)
        elif queue:
            self._post(group)

    def commit_here(self, make: Callable[[], Batch]) -> bool:
        """Commit one batch on the calling thread, with no event loop, if the
        log is idle: no group open and the worker thread idle.

        ``make`` builds the batch once the connection is held (so what it
        reads cannot change before the commit). The transaction waits for
        another process's write lock as the worker thread would: the caller
        is a plain thread that may block. No later append or call overtakes
        it: they queue behind the held connection.

        Returns:
            True once the batch committed; False if the log was busy (``make``
            not called, nothing written: append through the event loop).

        Raises:
            ConflictError, FencedError: the batch's own (nothing written).
            Whatever ``make`` raises, or the transaction's failure, typed.
        """
        with self._lock:
            if self._closed or self._open is not None or not self._worker.hold_if_idle():
                return False
        try:
            batch = make()
            (error,) = self._outcomes([batch], wait=True)
            if error is None:
                self.here_commits += 1
        finally:
            self._worker.release()
        if error is not None:
            raise error
        return True

    def seal(self, *, closing: bool = False) -> None:
        """Close the open group: later appends form a new group, committed after
        the call about to be queued (the open one is queued before it).

        With ``closing`` (the log's close()), no later append joins a group:
        :meth:`submit` refuses it. An append either joined a group before
        (which then commits before the connection closes, but for the busy
        write lock case of :meth:`_flush`) or is refused, having written
        nothing."""
        with self._lock:
            if closing:
                self._closed = True
            group, self._open = self._open, None
            queue = group is not None and group is not self._queued
        if queue and group is not None:  # not queued yet
            self._post(group)

    def _post(self, group: list[PendingAppend]) -> None:
        """Queue ``group``'s commit on the worker thread. The log's close()
        from another thread may have stopped the thread since ``group`` was
        taken (under the lock, posted after it): every caller is then told
        the closed error, nothing of the group having been written."""
        try:
            self._worker.post(functools.partial(self._commit, group))
        except BackendUnavailableError as exc:  # close() ran whole meanwhile
            settle([(append.loop, (append.future, None, exc)) for append in group])

    def close_if_empty(self) -> bool:
        """As :meth:`seal` with ``closing`` if no group is open (nothing to
        queue); False, and nothing done, if one is. Decided under the lock
        :meth:`submit` takes, so no append slips in between."""
        with self._lock:
            if self._open is not None:
                return False
            self._closed = True
            return True

    def _flush(self, group: list[PendingAppend]) -> None:
        """On an event loop's thread, one iteration after ``group`` opened: commit it.

        A group opens this way when the worker thread is idle. A lone append
        (:attr:`inline_max`) then commits here, with no hop to the worker
        thread and back: nothing else could run during its fsync anyway. A
        group of several runs' appends, or one opened while the thread is
        busy, is queued on the worker thread (:meth:`_queue`): under load
        (many runs) groups go there as soon as they open, so that one group's
        fsync overlaps with the steps of the runs that missed it (measured:
        more steps per second with 100 runs; docs/benchmarks.md, session 32).
        If another process holds the file's write lock, or another event
        loop's thread holds the connection, the group goes to the worker
        thread too, which may wait for it (the loop must not).
        """
        if self._open is not group:  # committed, or sealed: queued on the worker thread
            return
        if len(group) > self.inline_max or not self._worker.hold_if_idle():
            self._queue(group)
            return
        try:
            with self._lock:
                if self._open is not group:  # sealed from another thread meanwhile
                    return
                self._open = None
            try:
                outcomes = self._outcomes(group, wait=False)
            except WriteLockBusy:  # nothing written: the worker thread waits for the lock
                # Queued before the hold ends (post() never waits for it): a
                # close() from another thread that has not queued the
                # connection's close yet closes it after this commit; one that
                # already waits for the connection closes it first, and the
                # group's callers get the closed error, nothing written.
                self._post(group)
                return
        finally:
            self._worker.release()
        self.inline_commits += 1
        settle(
            [
                (append.loop, (append.future, None, error))
                for append, error in zip(group, outcomes, strict=True)
            ],
            here=asyncio.get_running_loop(),
        )

    def _queue(self, group: list[PendingAppend]) -> None:
        """Queue ``group``'s commit on the worker thread, unless it is no longer
        open (committed, or sealed: queued already) or is queued already;
        appends join it until the thread takes it (:meth:`_commit`), after the
        calls queued before it."""
        with self._lock:
            if self._open is not group or self._queued is group:
                return
            self._queued = group
        self._post(group)

    def _commit(
        self, group: list[PendingAppend]
    ) -> list[tuple[asyncio.AbstractEventLoop, Outcome]]:
        """On the worker thread: commit ``group``; every caller's outcome, for
        the thread to settle (:meth:`WorkerThread.post`)."""
        with self._lock:
            if self._open is group:  # appends from now on form the next group
                self._open = None
            if self._queued is group:
                self._queued = None
        outcomes = self._outcomes(group, wait=True)
        return [
            (append.loop, (append.future, None, error))
            for append, error in zip(group, outcomes, strict=True)
        ]

    def _outcomes(self, group: Sequence[Batch], *, wait: bool) -> list[BaseException | None]:
        """Commit ``group`` as one transaction: each append's error, or None.

        Raises:
            WriteLockBusy: ``wait`` is False and another process holds the
                write lock (nothing was written).
        """
        try:
            errors, written = self._connection.transact(
                functools.partial(apply_batches, group, self._known),
                durable=any(append.durable for append in group),
                doing="append failed",
                wait=wait,
            )
        except WriteLockBusy:
            raise
        except BaseException as exc:  # the transaction failed whole: every caller gets it
            _log.warning(
                "sqlite_group_commit_failed",
                path=self._connection.path,
                appends=len(group),
                error=repr(exc),
            )
            return [exc] * len(group)
        self._remember(written)
        self.commits += 1
        self.appends += len(group)
        return list(errors)

    def _remember(self, written: dict[str, Known]) -> None:
        """Keep the committed rows, dropping the runs least recently appended to."""
        known = self._known
        for run_id, row in written.items():
            known.pop(run_id, None)
            known[run_id] = row
        while len(known) > KNOWN_RUNS:
            del known[next(iter(known))]
