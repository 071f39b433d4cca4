"""Group commit: appends that arrive while a commit is in progress share the next one.

The log's worker thread commits one transaction at a time. While it waits
for the fsync of one, the event loop keeps running and other runs' appends
arrive: they join an open *group*, which the worker thread commits next as
ONE transaction, so one fsync makes all of them durable. Nothing waits on a
timer to fill a group: a lone append commits as soon as the thread is free,
exactly as it would alone.

Inside the group's transaction each append is checked and written as before
(its run's next seq and current writer epoch), all checks before its first
write, and a batch of several rows under its own SAVEPOINT: a ConflictError
or FencedError leaves nothing of that append and fails only its caller; the
others in the group commit. If the transaction itself fails (the
disk is full, the file turned read-only, the write lock stayed busy) it is
rolled back whole and every caller of the group gets that typed error:
nothing of the group is recorded. A caller's await returns only after the
transaction holding its events committed.

Order is kept: any other call to the worker thread (a claim, a lease update,
a snapshot, a read) seals the open group first, so an append never overtakes
a call submitted before it.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentlog._logging import get_logger
from agentlog.errors import AgentlogError, ConflictError
from agentlog.eventlog._base import RunInfo, check_next
from agentlog.eventlog._row_format import info_from_row, info_to_row
from agentlog.eventlog._worker_thread import Outcome, WorkerThread, settle
from agentlog.eventlog.events import Event
from agentlog.eventlog.sqlite._connection import SqliteConnection
from agentlog.eventlog.sqlite._schema import INSERT_EVENT, SELECT_RUN, UPSERT_RUN, update_run_sql

__all__ = ["GroupCommit", "PendingAppend"]

_log = get_logger(__name__)


@dataclass(slots=True, eq=False)
class PendingAppend:
    """One caller's batch, waiting for the group that will commit it."""

    events: Sequence[Event]
    rows: list[tuple[Any, ...]]
    """The events as :data:`~agentlog.eventlog.sqlite._schema.INSERT_EVENT`
    parameters, encoded on the caller's side before any lock is taken."""
    first_seq: int
    epoch: int
    durable: bool
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]


def _append_one(conn: sqlite3.Connection, append: PendingAppend) -> None:
    """The conditional append of one batch, inside the open transaction.

    Every check runs, and the new run index row is built, before the first
    write: a failing append of one row writes nothing. Only a batch of
    several rows can fail halfway (a row the index did not know of), so
    only such a batch needs a savepoint to undo its first rows.

    Raises:
        ConflictError: the batch is not the run's next seq.
        FencedError: a newer writer claimed the run.
        EventLogError: the batch's epoch was never claimed.
        NotSerializableError: a time in the batch cannot be stored.
    """
    run_id, first_seq = append.events[0].run_id, append.first_seq
    old = conn.execute(SELECT_RUN, (run_id,)).fetchone()
    info = RunInfo(run_id) if old is None else info_from_row(old)
    check_next(run_id, info.last_seq, first_seq, append.epoch, info.writer_epoch)
    new = info_to_row(info.after(append.events))
    try:
        if len(append.rows) == 1:
            conn.execute(INSERT_EVENT, append.rows[0])
        else:
            conn.executemany(INSERT_EVENT, append.rows)
    except sqlite3.IntegrityError as exc:
        # The index said the seq was free; the table disagrees.
        raise ConflictError(run_id, info.last_seq + 1, first_seq) from exc
    if old is None:
        conn.execute(UPSERT_RUN, new)
        return
    # Only the columns that changed: an index on an unchanged column (the
    # status, the wake-up time) is then not rewritten at every step.
    changed = tuple(i for i, (was, now) in enumerate(zip(old, new, strict=True)) if was != now)
    if changed:
        conn.execute(update_run_sql(changed), [*(new[i] for i in changed), run_id])


def _apply(group: list[PendingAppend], conn: sqlite3.Connection) -> list[AgentlogError | None]:
    """Each append of the group in turn; its own error, or None."""
    errors: list[AgentlogError | None] = []
    for append in group:
        guarded = len(append.rows) > 1
        if guarded:
            conn.execute("SAVEPOINT agentlog_append")
        try:
            _append_one(conn, append)
        except AgentlogError as exc:  # this append's own: the others go on
            if guarded:
                conn.execute("ROLLBACK TO agentlog_append")
            errors.append(exc)
        else:
            errors.append(None)
        if guarded:
            conn.execute("RELEASE agentlog_append")
    return errors


class GroupCommit:
    """Collects appends into groups and commits each group as one transaction.

    Args:
        connection: the log's connection (used on the worker thread only).
        worker: the log's worker thread, which runs the commits in order.
    """

    def __init__(self, connection: SqliteConnection, worker: WorkerThread) -> None:
        self._connection = connection
        self._worker = worker
        # Taken by the event loop (submit, seal) and by the worker thread (commit).
        self._lock = threading.Lock()
        self._open: list[PendingAppend] | None = None
        self.commits = 0
        """Groups committed so far (for benchmarks and tests: appends per fsync)."""
        self.appends = 0
        """Appends in those groups, each its caller's own success or error."""

    def submit(self, append: PendingAppend) -> None:
        """Add ``append`` to the open group, opening one (and queueing its commit) if none is."""
        with self._lock:
            group = self._open
            opened = group is None
            if group is None:
                group = self._open = []
            group.append(append)
        if opened:
            # Posted once the lock is free: the woken thread must not block on it.
            self._worker.post(functools.partial(self._commit, group))

    def seal(self) -> None:
        """Close the open group: later appends go into a group queued after the next call."""
        with self._lock:
            self._open = None

    def _commit(self, group: list[PendingAppend]) -> None:
        """On the worker thread: commit ``group`` and settle every caller in it."""
        with self._lock:
            if self._open is group:  # appends from now on form the next group
                self._open = None
        outcomes: list[BaseException | None]
        try:
            outcomes = list(
                self._connection.transact(
                    functools.partial(_apply, group),
                    durable=any(append.durable for append in group),
                    doing="append failed",
                )
            )
            self.commits += 1
            self.appends += len(group)
        except BaseException as exc:  # the transaction failed whole: every caller gets it
            outcomes = [exc] * len(group)
            _log.warning(
                "sqlite_group_commit_failed",
                path=self._connection.path,
                appends=len(group),
                error=repr(exc),
            )
        settled: list[tuple[asyncio.AbstractEventLoop, Outcome]] = [
            (append.loop, (append.future, None, error))
            for append, error in zip(group, outcomes, strict=True)
        ]
        settle(settled)
