"""The SQLite backend: the embedded default, one file, no servers.

The file's layout and its append-only :data:`MIGRATIONS` are in
:mod:`agentlog.eventlog.sqlite._schema`; opening, migrating and transactions
in :mod:`agentlog.eventlog.sqlite._connection`; the group commit of appends in
:mod:`agentlog.eventlog.sqlite._group_commit`.

Reads, the gap check and the run list are the indexed read path
(:mod:`agentlog.eventlog._indexed`, :mod:`agentlog.eventlog._sql_index`); this
module gives its hooks.

sqlite3 blocks, so each log owns one worker thread that owns the writing
connection; the event loop stays free while a group's commit waits for
fsync. A lone append commits on its event loop's thread instead, when the
worker thread is idle (:mod:`agentlog.eventlog.sqlite._group_commit`). The
small reads (a run's index row, its latest snapshot, a read's first batch)
skip that hop: they run on the caller's thread from a read-only connection
(:mod:`agentlog.eventlog.sqlite._reader`). Appends that arrive while a
commit is in progress (many runs in sync durability) share the next commit
and its one fsync; each still succeeds or fails on its own.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from agentlog._files import DEFAULT_FILE_MODE
from agentlog._logging import get_logger
from agentlog.crypto import PayloadCipher
from agentlog.eventlog._base import (
    Capabilities,
    RunInfo,
    Snapshot,
    check_batch,
    check_run_id,
    claimed,
    lease_expiry,
    leased,
    snapshots_kept_from,
)
from agentlog.eventlog._mailbox import ended_statuses_sql
from agentlog.eventlog._row_format import (
    MAX_SEQ,
    event_rows,
    from_us,
    info_from_row,
    info_to_row,
    seq_param,
    to_us,
)
from agentlog.eventlog._sql_index import SqlDialect, SqlIndexedEventLog, Statement
from agentlog.eventlog._tail import Changes, TailWake
from agentlog.eventlog._worker_thread import WorkerThread
from agentlog.eventlog.events import Event, utcnow
from agentlog.eventlog.sqlite._cold_read import SqliteColdRead
from agentlog.eventlog.sqlite._connection import SqliteConnection
from agentlog.eventlog.sqlite._group_commit import Batch, GroupCommit, PendingAppend
from agentlog.eventlog.sqlite._mailbox import SqliteMailbox
from agentlog.eventlog.sqlite._reader import ReadConnections
from agentlog.eventlog.sqlite._schema import (
    MIGRATIONS,
    NEXT_WAKE,
    READ_EVENTS,
    RUNNABLE,
    SELECT_RUN,
    UPSERT_RUN,
)

__all__ = ["MIGRATIONS", "SqliteEventLog"]

_log = get_logger(__name__)
_T = TypeVar("_T")


class SqliteEventLog(SqliteColdRead, SqliteMailbox, SqlIndexedEventLog):
    """Events, run index, writer claims and snapshots in one SQLite file.

    Args:
        path: the database file; its parent directories are created.
        keep_snapshots: how many of each run's newest snapshots to keep.
        busy_timeout: seconds a write waits for another process's write
            lock before it gives up with a retryable BackendUnavailableError.
        read_batch: events fetched per round trip to the worker thread while
            reading, so a long run is never loaded into memory at once.
        read_only: open the file read-only (for replay and inspection);
            every write then raises BackendUnavailableError. A file that
            cannot be opened for writing (a read-only file or filesystem) is
            opened read-only anyway, so it can still be read.
        create: create the file (and its directories) if it is missing; when
            False a missing file is a ConfigError and nothing is created.
        cipher: seal payload content and snapshots with per-run data keys
            (see :mod:`agentlog.eventlog._sealing`); None stores them in clear.
        file_mode: the mode of the file (and of its -wal and -shm files) when
            this call creates it: 0600 by default, whatever the umask, since
            the log holds what its runs were given and computed. Folders it
            creates get the same bits plus search (0700). An existing file
            keeps its mode.

    Raises:
        ConfigError: ``create`` is False and there is no file at ``path``.
        BackendUnavailableError: the file cannot be created, opened or
            migrated (unwritable directory, not a database, newer schema).
    """

    #: Appends through this instance wake its tails; other processes' at the next poll.
    capabilities = Capabilities(live_tail=True)
    _dialect = SqlDialect(
        "runs",
        param=lambda name: f":{name}",
        contains="instr({col}, {arg}) > 0",
        counts_table="run_counts",
        indexed_by=True,
    )

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        keep_snapshots: int = 3,
        busy_timeout: float = 5.0,
        read_batch: int = 1000,
        read_only: bool = False,
        create: bool = True,
        cipher: PayloadCipher | None = None,
        file_mode: int = DEFAULT_FILE_MODE,
    ) -> None:
        self.path = os.fspath(path)
        self.cipher = cipher
        self.url = "sqlite:///" + self.path
        self.keep_snapshots = keep_snapshots
        self.read_batch = read_batch
        self._closed = False
        self._changes = Changes()
        # The writing connection: opened at the first write (or here, for a
        # file that is new or needs migrating), then used by one thread at a
        # time: the worker thread, or a loop's thread committing a lone append
        # (see _group_commit). A log opened to be read opens one connection.
        self._db = SqliteConnection(
            self.path,
            busy_timeout=busy_timeout,
            read_only=read_only,
            create=create,
            file_mode=file_mode,
            defer=True,
        )
        self._worker = WorkerThread(f"agentlog-sqlite {self.path}", self._db.closed_error)
        self._group = GroupCommit(self._db, self._worker)
        # The small reads run on the caller's thread (see _reader).
        self._reads = ReadConnections(
            self.path,
            busy_timeout=busy_timeout,
            immutable_fallback=self._db.read_only,
            unavailable=self._db.unavailable,
            closed_error=self._db.closed_error,
            writable=not self._db.read_only,
        )
        try:
            if self._reads.open_here() != len(MIGRATIONS):
                self._db.open()  # migrates, or says why it cannot
        except BaseException:
            self._worker.stop()
            self._reads.close()
            self._db.close()
            raise

    @property
    def _conn(self) -> sqlite3.Connection:
        """The writing connection (opened by this first use if not yet)."""
        return self._db.conn

    @property
    def read_only(self) -> bool:
        """True if the file was opened read-only (asked for, or not writable)."""
        return self._db.read_only

    # -- the worker thread ------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise self._db.closed_error()

    async def _call(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        self._check_open()
        self._group.seal()  # so that no later append overtakes this call
        return await self._worker.run(functools.partial(fn, *args, **kwargs))

    def _transact(
        self, body: Callable[[sqlite3.Connection], _T], *, durable: bool | None, doing: str
    ) -> _T:
        return self._db.transact(body, durable=durable, doing=doing)

    def _query(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        return self._db.query(sql, params)

    def _read(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        """A read on the caller's thread, with no hop to the worker thread."""
        self._check_open()
        return self._reads.query(sql, params)

    # -- events -------------------------------------------------------------------

    async def append(self, events: Sequence[Event], *, durable: bool = True) -> None:
        """Append one run's batch; see :meth:`EventLog.append`.

        The batch joins the appends of other runs that arrive while a commit
        is in progress and is committed with them in one transaction (see
        :mod:`~agentlog.eventlog.sqlite._group_commit`); it returns once that
        transaction committed, or raises its own error or the group's.
        """
        _run_id, first_seq, epoch = check_batch(events)
        # Encode before taking the write lock: a bad payload fails with nothing written.
        rows = event_rows(events, epoch, self.cipher)
        self._check_open()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._group.submit(PendingAppend(events, rows, first_seq, epoch, durable, loop, future))
        await future
        self._changes.notify()

    def append_here(self, make: Callable[[], Sequence[Event]], *, durable: bool = True) -> bool:
        """:meth:`append` on the calling thread, with no event loop, if the log
        is idle (no append waiting for its commit, the worker thread idle).

        For a caller on a plain thread that would otherwise hand the append to
        an event loop and block until it is done (a LangGraph checkpointer's
        sync ``put``). ``make`` builds the batch once the log's connection is
        held for it, so what it reads cannot change before the commit. The
        same checks and the same commit as :meth:`append`: when it returns
        True the batch is committed (fsync'd if ``durable``).

        Returns:
            False if the log was busy or is closing: ``make`` was not called
            and nothing written (append through the event loop instead, which
            raises the closed error if it closed).

        Raises:
            ConflictError, FencedError, NotSerializableError, ValueError: as
                :meth:`append` (nothing written); whatever ``make`` raises.
        """
        self._check_open()

        def batch() -> Batch:
            events = make()
            _run_id, first_seq, epoch = check_batch(events)
            return Batch(events, event_rows(events, epoch, self.cipher), first_seq, epoch, durable)

        if not self._group.commit_here(batch):
            return False
        self._changes.notify()
        return True

    async def _stored_seq(self, run_id: str, *, newest: bool) -> int | None:
        sql = f"SELECT {'max' if newest else 'min'}(seq) FROM events WHERE run_id = ?"
        rows = self._read(sql, (run_id,))
        return None if rows[0][0] is None else int(rows[0][0])

    async def _event_rows(self, run_id: str, after: int, last: int, limit: int) -> list[Any]:
        return self._read(READ_EVENTS, (run_id, after, last, limit))

    async def _event_rows_ahead(self, run_id: str, after: int, last: int, limit: int) -> list[Any]:
        # The next batch of a long read: the worker thread fetches it while
        # the caller decodes and folds this one.
        return await self._call(self._query, READ_EVENTS, (run_id, after, last, limit))

    async def _tail_wake(self, run_id: str, poll_seconds: float) -> TailWake:
        # Appends through this instance wake the tail at once; appends by other
        # processes are seen at the next poll.
        return self._changes.wake(poll_seconds)

    # -- the run index ------------------------------------------------------------

    async def find_run(self, run_id: str) -> RunInfo | None:
        check_run_id(run_id)
        rows = self._read(SELECT_RUN, (run_id,))
        return info_from_row(rows[0]) if rows else None

    def last_seq_here(self, run_id: str) -> int | None:
        """The run's last seq from its index row, read on the calling thread
        with no event loop (None: no row). A cache of a run uses it to tell,
        without a hop to a loop, that nothing was appended since it read."""
        self._check_open()
        rows = self._reads.query_pooled("SELECT last_seq FROM runs WHERE run_id = ?", (run_id,))
        return int(rows[0][0]) if rows else None

    async def _select(self, *statements: Statement) -> list[list[Any]]:
        def each() -> list[list[Any]]:
            return [self._query(sql, params) for sql, params in statements]

        return await self._call(each)

    async def runnable(self, *, now: datetime | None = None, limit: int = 1000) -> list[RunInfo]:
        at = to_us(now or utcnow())
        rows = await self._call(self._query, RUNNABLE, (at, at, limit))
        return [info_from_row(row) for row in rows]

    async def next_wake(self) -> datetime | None:
        rows = await self._call(self._query, NEXT_WAKE, ())
        return from_us(rows[0][0]) if rows and rows[0][0] is not None else None

    # -- writers ------------------------------------------------------------------

    async def claim_writer(
        self,
        run_id: str,
        *,
        owner: str = "",
        lease_seconds: float | None = None,
        force: bool = True,
    ) -> int:
        check_run_id(run_id)

        expires = lease_expiry(lease_seconds)

        def body(conn: sqlite3.Connection) -> int:
            row = conn.execute(SELECT_RUN, (run_id,)).fetchone()
            info = RunInfo(run_id) if row is None else info_from_row(row)
            info = claimed(info, owner=owner, expires=expires, force=force)
            conn.execute(UPSERT_RUN, info_to_row(info))
            return info.writer_epoch

        epoch: int = await self._call(self._transact, body, durable=True, doing="claim failed")
        _log.info("writer_claimed", run_id=run_id, epoch=epoch, owner=owner, path=self.path)
        return epoch

    def _lease_update(self, run_id: str, epoch: int, expires: datetime | None) -> None:
        check_run_id(run_id)

        def body(conn: sqlite3.Connection) -> None:
            row = conn.execute(SELECT_RUN, (run_id,)).fetchone()
            info = None if row is None else info_from_row(row)
            info = leased(info, run_id, epoch, expires, self.url)
            conn.execute(
                "UPDATE runs SET lease_expires_at = ? WHERE run_id = ?",
                (None if info.lease_expires_at is None else to_us(info.lease_expires_at), run_id),
            )

        self._transact(body, durable=True, doing="lease update failed")

    async def renew_lease(self, run_id: str, epoch: int, lease_seconds: float) -> None:
        await self._call(self._lease_update, run_id, epoch, lease_expiry(lease_seconds))

    async def release_lease(self, run_id: str, epoch: int) -> None:
        await self._call(self._lease_update, run_id, epoch, None)

    # -- snapshots ----------------------------------------------------------------

    async def save_snapshot(self, snapshot: Snapshot) -> None:
        check_run_id(snapshot.run_id)
        snapshot = self._sealed_snapshot(snapshot)
        created = to_us(snapshot.created_at, "created_at")
        row = (snapshot.run_id, snapshot.seq, snapshot.state, created, snapshot.base_seq)

        def body(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR REPLACE INTO snapshots (run_id, seq, state, created_at, base_seq) "
                "VALUES (?,?,?,?,?)",
                row,
            )
            self._drop_old_snapshots(conn, snapshot.run_id, self.keep_snapshots)

        # A snapshot can always be rebuilt from the events: no extra fsync for it.
        await self._call(self._transact, body, durable=None, doing="snapshot save failed")

    async def load_snapshot(
        self, run_id: str, *, at_or_before: int | None = None
    ) -> Snapshot | None:
        check_run_id(run_id)
        upto = MAX_SEQ if at_or_before is None else seq_param(at_or_before)
        rows = self._read(
            "SELECT seq, state, created_at, base_seq FROM snapshots WHERE run_id = ? "
            "AND seq <= ? ORDER BY seq DESC LIMIT 1",
            (run_id, upto),
        )
        if not rows:
            return None
        seq, state, created, base_seq = rows[0]
        return self._opened_snapshot(Snapshot(run_id, seq, state, from_us(created), base_seq))

    @staticmethod
    def _drop_old_snapshots(conn: sqlite3.Connection, run_id: str, keep: int) -> None:
        """Delete the run's snapshots below what :func:`snapshots_kept_from` keeps."""
        kept = conn.execute(
            "SELECT seq, base_seq FROM snapshots WHERE run_id = ?", (run_id,)
        ).fetchall()
        floor = snapshots_kept_from(kept, keep)
        conn.execute("DELETE FROM snapshots WHERE run_id = ? AND seq < ?", (run_id, floor))

    # -- retention ----------------------------------------------------------------

    async def prune_many(
        self, run_ids: Sequence[str], *, keep_latest_snapshot: bool = False
    ) -> None:
        """Prune the runs in one transaction: one commit (one fsync) for them all."""
        ids = [(run_id,) for run_id in self._distinct_run_ids(run_ids)]

        ended = f"(SELECT status FROM runs WHERE run_id = ?) IN ({ended_statuses_sql()})"
        twice = [(run_id, run_id) for (run_id,) in ids]

        def body(conn: sqlite3.Connection) -> None:
            conn.executemany("DELETE FROM events WHERE run_id = ?", ids)
            # An unfinished run's unmoved messages stay for its next writer, and
            # its unreported ones for the next send of their keys.
            conn.executemany(
                "DELETE FROM run_messages WHERE run_id = ? "
                f"AND ((moved = 1 AND reported = 1) OR {ended})",
                twice,
            )
            conn.executemany(f"DELETE FROM run_mailboxes WHERE run_id = ? AND {ended}", twice)
            if keep_latest_snapshot:
                for (run_id,) in ids:
                    self._drop_old_snapshots(conn, run_id, 1)
            else:
                conn.executemany("DELETE FROM snapshots WHERE run_id = ?", ids)
            # The rows stay as tombstones: the run ids stay taken.
            conn.executemany("UPDATE runs SET archived = 1 WHERE run_id = ?", ids)

        if ids:
            await self._call(self._transact, body, durable=True, doing="prune failed")
        for (run_id,) in ids:
            _log.info(
                "run_pruned", run_id=run_id, path=self.path, kept_snapshot=keep_latest_snapshot
            )

    # -- lifecycle ------------------------------------------------------------------

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # The readers first: the writer's connection, closed last, checkpoints
        # the WAL into the file and removes it (a read-only one cannot).
        self._reads.close()
        # An open group commits first (on the worker thread); an append that
        # passed _check_open but joins no group before this is refused.
        self._group.seal(closing=True)
        if self._worker.started or not self._worker.hold_if_idle():
            await self._worker.run(self._db.close)
        else:  # the thread never started, and no other loop's thread holds the connection
            try:
                self._db.close()
            finally:
                self._worker.release()
        self._worker.stop()
