"""The SQLite backend: the embedded default, one file, no servers.

Layout of the file (created by the append-only :data:`MIGRATIONS`, whose
count is recorded in ``PRAGMA user_version``):

* ``events``: one row per event. The envelope fields are columns (``ts`` is
  integer microseconds since the Unix epoch, UTC) and ``payload`` holds the
  msgpack bytes of :func:`~agentlog.eventlog.codec.encode_payload`.
  ``UNIQUE(run_id, seq)`` is the last line of defence of the conditional
  append. ``checksum`` (migration 2) is
  :func:`~agentlog.eventlog.codec.row_checksum` of the other columns,
  verified on every read. Rows written before migration 2 have a NULL
  checksum and are read unverified: the migration does not backfill them,
  because a checksum computed now over bytes that may already have rotted
  would vouch for the rot.
* ``runs``: the run index and the writer claim (epoch and lease), updated in
  the same transaction as the events, so the two never disagree. A pruned
  run keeps its row with ``archived = 1`` (a tombstone), so its id stays taken.
* ``snapshots``: the newest ``keep_snapshots`` snapshots of each run (their
  bytes carry the projector's own checksum).

A read checks that the seqs it returns have no gap up to the run's last seq
in the index, so a deleted row is a CorruptEventError naming the missing seq.

Every write is one ``BEGIN IMMEDIATE`` transaction: it takes the file's
write lock first, so the epoch and seq checks and the inserts see one
consistent file even when several processes share it. The journal is WAL, so
readers never wait for the writer. ``durable=True`` commits with
``synchronous=FULL`` (the WAL is fsynced at every commit); ``durable=False``
uses NORMAL, which survives a process crash but not a power loss.

sqlite3 blocks, so each log owns one worker thread that owns the connection;
the event loop stays free while a commit waits for fsync.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from agentlog._logging import get_logger
from agentlog.errors import (
    AgentlogError,
    BackendUnavailableError,
    ConfigError,
    ConflictError,
    CorruptEventError,
    NotSerializableError,
    RunArchivedError,
    UnknownRunError,
)
from agentlog.eventlog.base import (
    EventLog,
    RunInfo,
    Snapshot,
    check_batch,
    check_lease,
    check_next,
    check_run_id,
)
from agentlog.eventlog.codec import decode_payload, encode_payload, row_checksum
from agentlog.eventlog.events import Event, RunStatus, status_after, utcnow
from agentlog.eventlog.worker_thread import WorkerThread

__all__ = ["MIGRATIONS", "SqliteEventLog"]

_log = get_logger(__name__)
_T = TypeVar("_T")

#: Schema migrations, applied in order; append only, never edit a shipped one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        "CREATE TABLE events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, "
        "ts INTEGER NOT NULL, schema_v INTEGER NOT NULL, writer_epoch INTEGER NOT NULL, "
        "payload BLOB NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID",
        "CREATE TABLE runs (run_id TEXT PRIMARY KEY, workflow TEXT NOT NULL, "
        "version TEXT NOT NULL, status TEXT NOT NULL, last_seq INTEGER NOT NULL, "
        "steps INTEGER NOT NULL, started_at INTEGER, updated_at INTEGER, "
        "writer_epoch INTEGER NOT NULL, lease_owner TEXT NOT NULL, lease_expires_at INTEGER) "
        "WITHOUT ROWID",
        "CREATE TABLE snapshots (run_id TEXT NOT NULL, seq INTEGER NOT NULL, "
        "state BLOB NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (run_id, seq))",
    ),
    (
        "ALTER TABLE events ADD COLUMN checksum INTEGER",
        "ALTER TABLE runs ADD COLUMN archived INTEGER NOT NULL DEFAULT 0",
    ),
    (
        "ALTER TABLE runs ADD COLUMN wake_at INTEGER",
        "CREATE INDEX runs_by_wake ON runs (wake_at) WHERE wake_at IS NOT NULL",
        "CREATE INDEX runs_by_status ON runs (status)",
    ),
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_MAX_SEQ = 2**63 - 1
_BUSY, _LOCKED, _READONLY, _CANTOPEN, _NOTADB, _FULL = 5, 6, 8, 14, 26, 13

# The run index columns are RunInfo's fields, by name.
_RUN_FIELDS = tuple(f.name for f in dataclasses.fields(RunInfo))
_RUN_COLUMNS = ", ".join(_RUN_FIELDS)
_TIME_FIELDS = frozenset(
    {"started_at", "updated_at", "lease_expires_at", "wake_at"}
)  # microseconds
_SELECT_RUN = f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?"
_UPSERT_RUN = (
    f"INSERT OR REPLACE INTO runs ({_RUN_COLUMNS}) VALUES ({', '.join('?' * len(_RUN_FIELDS))})"
)
# The same rule as RunInfo.needs_worker, answered from the indexes.
_RUNNABLE = (
    f"SELECT {_RUN_COLUMNS} FROM runs WHERE last_seq > 0 "
    "AND (lease_expires_at IS NULL OR lease_expires_at <= ?1) "
    "AND (status = 'running' OR (status = 'waiting' AND wake_at <= ?2)) "
    "ORDER BY coalesce(wake_at, updated_at) LIMIT ?3"
)
_NEXT_WAKE = "SELECT min(wake_at) FROM runs WHERE status = 'waiting' AND wake_at IS NOT NULL"
_EVENT_COLUMNS = "run_id, seq, type, ts, schema_v, writer_epoch, payload, checksum"
_INSERT_EVENT = f"INSERT INTO events ({_EVENT_COLUMNS}) VALUES (?,?,?,?,?,?,?,?)"
_READ_EVENTS = (
    "SELECT seq, type, ts, schema_v, writer_epoch, payload, checksum FROM events "
    "WHERE run_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?"
)


def _seq_param(seq: int) -> int:
    """A seq bound as SQLite can take it: no stored seq is below 0 or above 2**63 - 1."""
    return max(0, min(seq, _MAX_SEQ))


def _to_us(moment: datetime, what: str = "ts") -> int:
    if moment.tzinfo is None:
        raise NotSerializableError(what, "naive datetime")
    return (moment - _EPOCH) // _MICROSECOND


def _from_us(us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=us)


def _info_from_row(row: Sequence[Any]) -> RunInfo:
    values = dict(zip(_RUN_FIELDS, row, strict=True))
    for name in _TIME_FIELDS:
        values[name] = None if values[name] is None else _from_us(values[name])
    values["archived"] = bool(values["archived"])
    return RunInfo(**values)


def _info_to_row(info: RunInfo) -> list[Any]:
    values = [getattr(info, name) for name in _RUN_FIELDS]
    for i, name in enumerate(_RUN_FIELDS):
        if name in _TIME_FIELDS and values[i] is not None:
            values[i] = _to_us(values[i])
    return values


def _event_row(event: Event, epoch: int) -> tuple[Any, ...]:
    ts, data = event.ts, event.data
    if ts.tzinfo is None:
        raise NotSerializableError(f"{data.type} seq {event.seq} ts", "naive datetime")
    us = (ts - _EPOCH) // _MICROSECOND
    row = (event.run_id, event.seq, data.type, us, event.schema_v, epoch, encode_payload(data))
    return (*row, row_checksum(*row))


def _event_from_row(run_id: str, row: Sequence[Any], where: str) -> Event:
    """Verify a stored row's checksum and decode it.

    Raises:
        CorruptEventError: naming the run and seq.
    """
    seq, event_type, ts, schema_v, epoch, payload, stored = row
    try:
        if stored is not None:
            computed = row_checksum(run_id, seq, event_type, ts, schema_v, epoch, payload)
            if computed != stored:
                raise CorruptEventError(
                    run_id,
                    seq,
                    f"checksum mismatch (stored {stored}, computed {computed}): the row changed "
                    "after it was written",
                    where,
                )
        data = decode_payload(event_type, schema_v, payload, run_id=run_id, seq=seq, where=where)
        return Event(run_id, seq, data, _from_us(ts), epoch)
    except (TypeError, ValueError, OverflowError, NotSerializableError) as exc:
        # Columns of the wrong type: written by something else than agentlog.
        raise CorruptEventError(run_id, seq, f"bad envelope column: {exc}", where) from exc


def _writable(path: Path) -> bool:
    """Whether the file and its folder (for the WAL and its index) can be written."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _is_busy(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF in (_BUSY, _LOCKED)


_ADVICE = {
    _BUSY: "another process held the write lock too long; retry the call",
    _LOCKED: "another process held the write lock too long; retry the call",
    _READONLY: "the file, its directory or the connection is read-only; fix the "
    "permissions or point the URL at a writable path",
    _CANTOPEN: "check that the path names a file in a directory you can write",
    _NOTADB: "the file is not an SQLite database; point the URL at another path",
    _FULL: "the disk is full; free some space and retry",
}


class SqliteEventLog(EventLog):
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

    Raises:
        ConfigError: ``create`` is False and there is no file at ``path``.
        BackendUnavailableError: the file cannot be created, opened or
            migrated (unwritable directory, not a database, newer schema).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        keep_snapshots: int = 3,
        busy_timeout: float = 5.0,
        read_batch: int = 1000,
        read_only: bool = False,
        create: bool = True,
    ) -> None:
        self.path = os.fspath(path)
        self.url = "sqlite:///" + self.path
        self.keep_snapshots = keep_snapshots
        self.read_only = read_only
        self._busy_timeout = busy_timeout
        self._batch_size = read_batch
        self._synchronous = ""
        self._closed = False
        self._changed = asyncio.Event()
        # Opened here, then only ever used by the worker thread.
        self._conn = self._open(create)
        self._worker = WorkerThread(f"agentlog-sqlite {self.path}")

    # -- the worker thread ------------------------------------------------------

    def _unavailable(self, exc: BaseException, doing: str) -> BackendUnavailableError:
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        advice = _ADVICE.get(code, "check the file, its directory and the disk")
        error = BackendUnavailableError(f"sqlite log {self.path!r}: {doing}: {exc}; {advice}.")
        error.retryable = code in (_BUSY, _LOCKED, _FULL)
        return error

    def _open(self, create: bool) -> sqlite3.Connection:
        path = Path(self.path)
        if not create and not path.exists():
            raise ConfigError(
                f"no log at {self.path}: check the log URL (--log or AGENTLOG_LOG); "
                "a command that only reads never creates one"
            )
        if create:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                error = self._unavailable(exc, "cannot create the directory")
                error.retryable = False
                raise error from exc
        if not self.read_only and path.exists() and not _writable(path):
            # A read-only file or filesystem: still readable, never written.
            self.read_only = True
        modes = ["ro", "ro&immutable=1"] if self.read_only else ["rwc"]
        for i, mode in enumerate(modes):
            try:
                conn = self._connect(mode)
            except BackendUnavailableError:
                # A WAL file needs its -shm beside it; where none can be made
                # (a read-only filesystem), nothing can change the file either.
                if i + 1 < len(modes):
                    continue
                raise
            break
        _log.debug("sqlite_log_opened", path=self.path, read_only=self.read_only)
        return conn

    def _connect(self, mode: str) -> sqlite3.Connection:
        target = f"file:{quote(os.path.abspath(self.path))}?mode={mode}"
        try:
            conn = sqlite3.connect(
                target,
                uri=True,
                timeout=self._busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise self._unavailable(exc, "cannot open the file") from exc
        try:
            self._migrate(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if not self.read_only:
                conn.execute("PRAGMA journal_mode=WAL")
            else:  # the first read: a WAL file that cannot be read fails here
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            raise self._unavailable(exc, "cannot read the file") from exc
        if version > len(MIGRATIONS):
            raise BackendUnavailableError(
                f"sqlite log {self.path!r} has schema version {version}, newer than this "
                f"agentlog knows ({len(MIGRATIONS)}); upgrade agentlog to open it."
            )
        if version == len(MIGRATIONS):
            return
        if self.read_only:
            raise BackendUnavailableError(
                f"sqlite log {self.path!r} needs a schema upgrade (version {version} of "
                f"{len(MIGRATIONS)}) and is opened read-only; open it writable once."
            )

        def apply(conn: sqlite3.Connection) -> None:
            # Re-read under the write lock: another process may have migrated.
            current = conn.execute("PRAGMA user_version").fetchone()[0]
            for statements in MIGRATIONS[current:]:
                for statement in statements:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")

        self._transact(apply, durable=True, conn=conn, doing="cannot create the schema")

    def _transact(
        self,
        body: Callable[[sqlite3.Connection], _T],
        *,
        durable: bool | None,
        conn: sqlite3.Connection | None = None,
        doing: str = "write failed",
    ) -> _T:
        """Run ``body`` in one BEGIN IMMEDIATE transaction, retrying on SQLITE_BUSY."""
        conn = conn or self._conn
        if self.read_only:
            raise BackendUnavailableError(
                f"sqlite log {self.path!r} is opened read-only; open it without read_only to write."
            )
        if durable is not None:
            mode = "FULL" if durable else "NORMAL"
            if mode != self._synchronous:
                conn.execute(f"PRAGMA synchronous={mode}")
                self._synchronous = mode
        # busy_timeout already waits inside sqlite; the retries cover the
        # cases it does not (a COMMIT that finds the WAL being checkpointed).
        for attempt in range(3):
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    result = body(conn)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                return result
            except sqlite3.Error as exc:
                if attempt < 2 and _is_busy(exc):
                    _log.info("sqlite_busy_retry", path=self.path, attempt=attempt + 1)
                    time.sleep(0.01 * (attempt + 1))
                    continue
                raise self._unavailable(exc, doing) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _query(self, sql: str, params: Sequence[Any]) -> list[Any]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._unavailable(exc, "read failed") from exc

    async def _call(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        if self._closed:
            raise BackendUnavailableError(
                f"sqlite log {self.path!r} is closed; open it again with open_log()."
            )
        return await self._worker.run(functools.partial(fn, *args, **kwargs))

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # -- events -------------------------------------------------------------------

    async def append(self, events: Sequence[Event], *, durable: bool = True) -> None:
        run_id, first_seq, epoch = check_batch(events)
        # Encode before taking the write lock: a bad payload fails with nothing written.
        rows = [_event_row(event, epoch) for event in events]

        def body(conn: sqlite3.Connection) -> None:
            row = conn.execute(_SELECT_RUN, (run_id,)).fetchone()
            info = RunInfo(run_id) if row is None else _info_from_row(row)
            check_next(run_id, info.last_seq, first_seq, epoch, info.writer_epoch)
            try:
                if len(rows) == 1:
                    conn.execute(_INSERT_EVENT, rows[0])
                else:
                    conn.executemany(_INSERT_EVENT, rows)
            except sqlite3.IntegrityError as exc:
                # The index said the seq was free; the table disagrees.
                raise ConflictError(run_id, info.last_seq + 1, first_seq) from exc
            conn.execute(_UPSERT_RUN, _info_to_row(info.after(events)))

        await self._call(self._transact, body, durable=durable, doing="append failed")
        self._notify()

    def _read_start(self, run_id: str, after_seq: int, upto_seq: int) -> tuple[int, int]:
        """The seqs a read must return, ``(first, last)``, from the run index.

        Raises:
            UnknownRunError: nothing was ever recorded for the run.
            RunArchivedError: the range starts before the first event still
                stored: the rest was pruned into the archive.
        """
        rows = self._query(_SELECT_RUN, (run_id,))
        if not rows:
            stored = self._query("SELECT max(seq) FROM events WHERE run_id = ?", (run_id,))[0][0]
            if stored is not None:
                # Events but no index row: the index was damaged, the events are not.
                return after_seq + 1, min(upto_seq, stored)
            raise UnknownRunError(run_id, self.url)
        info = _info_from_row(rows[0])
        first, last = after_seq + 1, min(upto_seq, info.last_seq)
        if info.archived and first <= last:
            stored = self._query("SELECT min(seq) FROM events WHERE run_id = ?", (run_id,))[0][0]
            if stored is None or first < stored:
                raise RunArchivedError(run_id, self.url)
        return first, last

    def _read_batch(self, run_id: str, after_seq: int, last: int) -> tuple[list[Event], Any]:
        """Decode up to one batch; a decode error is returned after the good events."""
        rows = self._query(_READ_EVENTS, (run_id, after_seq, last, self._batch_size))
        events: list[Event] = []
        for row in rows:
            if row[0] != after_seq + len(events) + 1:
                return events, self._gap(run_id, after_seq + len(events) + 1, f"seq {row[0]}")
            try:
                events.append(_event_from_row(run_id, row, self.url))
            except CorruptEventError as exc:
                return events, exc
        if len(rows) < self._batch_size and after_seq + len(events) < last:
            return events, self._gap(run_id, after_seq + len(events) + 1, "no event")
        return events, None

    def _gap(self, run_id: str, missing: int, found: str) -> AgentlogError:
        rows = self._query(_SELECT_RUN, (run_id,))
        if rows and _info_from_row(rows[0]).archived:
            return RunArchivedError(run_id, self.url)  # pruned while we read
        return CorruptEventError(
            run_id,
            missing,
            f"seq {missing} is missing: {found} follows seq {missing - 1} (a deleted or "
            "damaged row)",
            self.url,
        )

    async def read(
        self, run_id: str, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> AsyncIterator[Event]:
        check_run_id(run_id)
        after = _seq_param(after_seq)
        first, last = await self._call(
            self._read_start, run_id, after, _MAX_SEQ if upto_seq is None else _seq_param(upto_seq)
        )
        after = first - 1
        while after < last:
            events, error = await self._call(self._read_batch, run_id, after, last)
            for event in events:
                yield event
            if error is not None:
                if isinstance(error, CorruptEventError):
                    _log.debug("corrupt_event", run_id=error.run_id, seq=error.seq, path=self.path)
                raise error
            after = events[-1].seq

    async def tail(
        self, run_id: str, *, after_seq: int = 0, poll_seconds: float = 0.05
    ) -> AsyncIterator[Event]:
        # Appends through this instance wake the tail at once; appends by other
        # processes are seen at the next poll.
        while True:
            changed = self._changed
            try:
                async for event in self.read(run_id, after_seq=after_seq):
                    after_seq = event.seq
                    yield event
                    if status_after("", event.type) in RunStatus.TERMINAL:
                        return
            except RunArchivedError:
                raise
            except UnknownRunError:
                pass  # not started yet: wait for its first event
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), poll_seconds)

    # -- the run index ------------------------------------------------------------

    async def find_run(self, run_id: str) -> RunInfo | None:
        check_run_id(run_id)
        rows = await self._call(self._query, _SELECT_RUN, (run_id,))
        return _info_from_row(rows[0]) if rows else None

    async def list_runs(self, *, status: str | None = None) -> list[RunInfo]:
        sql = f"SELECT {_RUN_COLUMNS} FROM runs WHERE last_seq > 0"
        params: tuple[str, ...] = ()
        if status is not None:
            sql, params = sql + " AND status = ?", (status,)
        rows = await self._call(self._query, sql + " ORDER BY updated_at DESC", params)
        return [_info_from_row(row) for row in rows]

    async def runnable(self, *, now: datetime | None = None, limit: int = 1000) -> list[RunInfo]:
        at = _to_us(now or utcnow())
        rows = await self._call(self._query, _RUNNABLE, (at, at, limit))
        return [_info_from_row(row) for row in rows]

    async def next_wake(self) -> datetime | None:
        rows = await self._call(self._query, _NEXT_WAKE, ())
        return _from_us(rows[0][0]) if rows and rows[0][0] is not None else None

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

        def body(conn: sqlite3.Connection) -> int:
            row = conn.execute(_SELECT_RUN, (run_id,)).fetchone()
            info = RunInfo(run_id) if row is None else _info_from_row(row)
            now = utcnow()
            if not force:
                check_lease(info)
            expires = None if lease_seconds is None else now + timedelta(seconds=lease_seconds)
            epoch = info.writer_epoch + 1
            claimed = dataclasses.replace(
                info, writer_epoch=epoch, lease_owner=owner, lease_expires_at=expires
            )
            conn.execute(_UPSERT_RUN, _info_to_row(claimed))
            return epoch

        epoch: int = await self._call(self._transact, body, durable=True, doing="claim failed")
        _log.info("writer_claimed", run_id=run_id, epoch=epoch, owner=owner, path=self.path)
        return epoch

    def _lease_update(self, run_id: str, epoch: int, expires: datetime | None) -> None:
        check_run_id(run_id)

        def body(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT writer_epoch FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None:
                raise UnknownRunError(run_id, self.url)
            check_next(run_id, 0, 1, epoch, row[0])
            conn.execute(
                "UPDATE runs SET lease_expires_at = ? WHERE run_id = ?",
                (None if expires is None else _to_us(expires), run_id),
            )

        self._transact(body, durable=True, doing="lease update failed")

    async def renew_lease(self, run_id: str, epoch: int, lease_seconds: float) -> None:
        expires = utcnow() + timedelta(seconds=lease_seconds)
        await self._call(self._lease_update, run_id, epoch, expires)

    async def release_lease(self, run_id: str, epoch: int) -> None:
        await self._call(self._lease_update, run_id, epoch, None)

    # -- snapshots ----------------------------------------------------------------

    async def save_snapshot(self, snapshot: Snapshot) -> None:
        check_run_id(snapshot.run_id)
        created = _to_us(snapshot.created_at, "created_at")
        row = (snapshot.run_id, snapshot.seq, snapshot.state, created)

        def body(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT OR REPLACE INTO snapshots VALUES (?,?,?,?)", row)
            conn.execute(
                "DELETE FROM snapshots WHERE run_id = ? AND seq NOT IN (SELECT seq FROM "
                "snapshots WHERE run_id = ? ORDER BY seq DESC LIMIT ?)",
                (snapshot.run_id, snapshot.run_id, self.keep_snapshots),
            )

        # A snapshot can always be rebuilt from the events: no extra fsync for it.
        await self._call(self._transact, body, durable=None, doing="snapshot save failed")

    async def load_snapshot(
        self, run_id: str, *, at_or_before: int | None = None
    ) -> Snapshot | None:
        check_run_id(run_id)
        upto = _MAX_SEQ if at_or_before is None else _seq_param(at_or_before)
        rows = await self._call(
            self._query,
            "SELECT seq, state, created_at FROM snapshots WHERE run_id = ? AND seq <= ? "
            "ORDER BY seq DESC LIMIT 1",
            (run_id, upto),
        )
        if not rows:
            return None
        seq, state, created = rows[0]
        return Snapshot(run_id, seq, state, _from_us(created))

    # -- retention ----------------------------------------------------------------

    async def prune(self, run_id: str, *, keep_latest_snapshot: bool = False) -> None:
        check_run_id(run_id)

        def body(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM events WHERE run_id = ?", (run_id,))
            kept = conn.execute(
                "SELECT max(seq) FROM snapshots WHERE run_id = ?", (run_id,)
            ).fetchone()[0]
            if keep_latest_snapshot and kept is not None:
                conn.execute("DELETE FROM snapshots WHERE run_id = ? AND seq < ?", (run_id, kept))
            else:
                conn.execute("DELETE FROM snapshots WHERE run_id = ?", (run_id,))
            # The row stays as a tombstone: the run id stays taken.
            conn.execute("UPDATE runs SET archived = 1 WHERE run_id = ?", (run_id,))

        await self._call(self._transact, body, durable=True, doing="prune failed")
        _log.info("run_pruned", run_id=run_id, path=self.path, kept_snapshot=keep_latest_snapshot)

    # -- lifecycle ------------------------------------------------------------------

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._worker.run(self._conn.close)
        self._worker.stop()
