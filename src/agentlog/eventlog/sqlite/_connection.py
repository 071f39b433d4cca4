"""One SQLite file's connection: opening, migrating, transactions, error mapping.

Every write is one ``BEGIN IMMEDIATE`` transaction: it takes the file's
write lock first, so the epoch and seq checks and the inserts see one
consistent file even when several processes share it. The journal is WAL, so
readers never wait for the writer. A durable write commits with
``synchronous=FULL`` (the WAL is fsynced at every commit); a non-durable one
uses NORMAL, which survives a process crash but not a power loss.

The connection is opened at its first use (a write, or a read sent to the
log's worker thread), or at once with ``defer=False`` or for a file this
call creates. It is used by one thread at a time: the log's worker thread,
or an event loop's thread that commits a lone append while the worker thread
is idle (:meth:`~agentlog.eventlog._worker_thread.WorkerThread.hold_if_idle`;
such a transaction never waits for the write lock: ``wait=False``). A log
opened on an existing file to be read opens no writing connection at all
(issue 23 item 8): its reads run on read connections
(:mod:`~agentlog.eventlog.sqlite._reader`).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from agentlog._files import DEFAULT_FILE_MODE, create_file, make_folders
from agentlog._logging import get_logger
from agentlog.errors import BackendUnavailableError, ConfigError
from agentlog.eventlog.sqlite._schema import MIGRATIONS

__all__ = ["SqliteConnection", "WriteLockBusy"]

_log = get_logger(__name__)
_T = TypeVar("_T")

#: The page size of a new file. The events table is WITHOUT ROWID, so its rows
#: live in an index b-tree, where a row keeps at most about a quarter of a page
#: in place: on 4 KiB pages an event over ~1,000 bytes (a LangGraph checkpoint
#: with a chat message) spilled the rest into an overflow page of its own,
#: mostly empty, and the file grew 2.5 bytes per byte stored. 8 KiB pages keep
#: rows up to ~2,000 bytes in place (issue 23 item 8). An existing file keeps its size.
PAGE_SIZE = 8192

_BUSY, _LOCKED, _READONLY, _CANTOPEN, _NOTADB, _FULL = 5, 6, 8, 14, 26, 13
_ADVICE = {
    _BUSY: "another process held the write lock too long; retry the call",
    _LOCKED: "another process held the write lock too long; retry the call",
    _READONLY: "the file, its directory or the connection is read-only; fix the "
    "permissions or point the URL at a writable path",
    _CANTOPEN: "check that the path names a file in a directory you can write",
    _NOTADB: "the file is not an SQLite database; point the URL at another path",
    _FULL: "the disk is full; free some space and retry",
}


class WriteLockBusy(Exception):
    """A transaction that was not to wait found the write lock taken (nothing was written)."""


def _writable(path: str) -> bool:
    """Whether the file and its folder (for the WAL and its index) can be written."""
    return os.access(path, os.W_OK) and os.access(os.path.dirname(path) or ".", os.W_OK)


def _is_busy(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF in (_BUSY, _LOCKED)


class SqliteConnection:
    """The connection to one log file, opened and migrated.

    Args:
        path: the database file.
        busy_timeout: seconds a write waits for another process's write lock.
        read_only: open read-only; a file that cannot be written is opened
            read-only anyway (see :attr:`read_only` after opening).
        create: create the file and its directories if missing.
        defer: open the connection at its first use, not now (unless this
            call created the file: a new file is migrated at once).

    Raises:
        ConfigError: ``create`` is False and there is no file at ``path``.
        BackendUnavailableError: the file cannot be created, opened or migrated.
    """

    def __init__(
        self,
        path: str,
        *,
        busy_timeout: float,
        read_only: bool,
        create: bool,
        file_mode: int = DEFAULT_FILE_MODE,
        defer: bool = False,
    ) -> None:
        self.path = path
        self.file_mode = file_mode
        self.read_only = read_only
        self._busy_timeout = busy_timeout
        self._synchronous = ""
        self._busy_ms = round(busy_timeout * 1000)  # what sqlite waits for the lock now
        self._conn: sqlite3.Connection | None = None
        self._closed = False  # by close(): never opened again
        self._opening = threading.Lock()
        #: True if this call created the file (it is then migrated at once).
        self.created = self._prepare(create)
        if not defer or self.created:
            self.open()

    @property
    def opened(self) -> bool:
        """Whether the connection is open (a deferred one opens at its first use)."""
        return self._conn is not None

    @property
    def conn(self) -> sqlite3.Connection:
        """The connection, opened (and the file migrated) at the first use."""
        conn = self._conn
        return conn if conn is not None else self.open()

    def open(self) -> sqlite3.Connection:
        """Open the connection now, if it is not open yet, migrating the file.

        Raises:
            BackendUnavailableError: the file cannot be opened or migrated,
                or :meth:`close` ran (:meth:`closed_error`).
        """
        with self._opening:
            if self._conn is None:
                if self._closed:
                    raise self.closed_error()
                self._conn = self._open()
            return self._conn

    def close(self) -> None:
        """Close the connection if it was opened (it checkpoints the WAL). It
        is never opened again: a write queued behind this call (one that
        raced the log's close) fails with :meth:`closed_error`, having
        written nothing, rather than reopening the file after close."""
        with self._opening:
            conn, self._conn, self._closed = self._conn, None, True
        if conn is not None:
            conn.close()

    def closed_error(self) -> BackendUnavailableError:
        """The typed error of a call to a closed log."""
        error = BackendUnavailableError(
            f"sqlite log {self.path!r} is closed; open it again with open_log()."
        )
        error.retryable = False  # retrying on this log cannot help
        return error

    def unavailable(self, exc: BaseException, doing: str) -> BackendUnavailableError:
        """The typed error for a failed sqlite call, with advice by error code."""
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        advice = _ADVICE.get(code, "check the file, its directory and the disk")
        error = BackendUnavailableError(f"sqlite log {self.path!r}: {doing}: {exc}; {advice}.")
        error.retryable = code in (_BUSY, _LOCKED, _FULL)
        return error

    def _prepare(self, create: bool) -> bool:
        """Check the path, create a missing file; True if this call created it."""
        # os.path, not pathlib: one stat, and no Path built, on every open (issue 23 item 8).
        path, exists = self.path, os.path.exists(self.path)
        if not create and not exists:
            raise ConfigError(
                f"no log at {self.path}: check the log URL (--log or AGENTLOG_LOG); "
                "a command that only reads never creates one"
            )
        if create and not self.read_only and not exists:
            # Made here, with its mode, before SQLite makes it with 0644: SQLite
            # gives the -wal and -shm files the mode of the database file.
            try:
                make_folders(Path(path).parent, self.file_mode)
                create_file(Path(path), self.file_mode)
            except OSError as exc:
                error = self.unavailable(exc, "cannot create the file or its directory")
                error.retryable = False
                raise error from exc
            created = exists = True
        else:
            created = False
        if not self.read_only and exists and not _writable(path):
            # A read-only file or filesystem: still readable, never written.
            self.read_only = True
        return created

    def _open(self) -> sqlite3.Connection:
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
            raise self.unavailable(exc, "cannot open the file") from exc
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
                if version == 0:  # a new file: its page size is fixed once it has content
                    conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
                conn.execute("PRAGMA journal_mode=WAL")
            else:  # the first read: a WAL file that cannot be read fails here
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            raise self.unavailable(exc, "cannot read the file") from exc
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

        self.transact(apply, durable=True, conn=conn, doing="cannot create the schema")

    def transact(
        self,
        body: Callable[[sqlite3.Connection], _T],
        *,
        durable: bool | None,
        conn: sqlite3.Connection | None = None,
        doing: str = "write failed",
        wait: bool = True,
    ) -> _T:
        """Run ``body`` in one BEGIN IMMEDIATE transaction, retrying on SQLITE_BUSY.

        ``body`` may run more than once (after a busy retry), each time in a
        fresh transaction; what it returns is from the run that committed.

        Args:
            durable: commit with synchronous=FULL (True) or NORMAL (False);
                None keeps the current setting.
            wait: False for a transaction on the event loop's thread: it
                must not wait for another process's write lock (nor sleep to
                retry), so it gives up at once with WriteLockBusy, having
                written nothing, and the caller hands the work to the worker
                thread, which waits.

        Raises:
            WriteLockBusy: ``wait`` is False and the write lock was taken.
            BackendUnavailableError: read-only, or sqlite failed (the
                transaction is rolled back: nothing of it is recorded).
            Whatever ``body`` raises (the transaction is rolled back).
        """
        conn = conn or self.conn
        if self.read_only:
            raise BackendUnavailableError(
                f"sqlite log {self.path!r} is opened read-only; open it without read_only to write."
            )
        if durable is not None:
            mode = "FULL" if durable else "NORMAL"
            if mode != self._synchronous:
                conn.execute(f"PRAGMA synchronous={mode}")
                self._synchronous = mode
        self._wait_for_lock(conn, wait)
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
                if not wait and _is_busy(exc):
                    raise WriteLockBusy(str(exc)) from exc
                if attempt < 2 and _is_busy(exc):
                    _log.info("sqlite_busy_retry", path=self.path, attempt=attempt + 1)
                    time.sleep(0.01 * (attempt + 1))
                    continue
                raise self.unavailable(exc, doing) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def query(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        """Rows of a read, with sqlite errors translated.

        It waits for another process's lock as configured, even after a
        transaction that did not wait (``wait=False``).
        """
        try:
            conn = self.conn
            self._wait_for_lock(conn, True)
            return conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self.unavailable(exc, "read failed") from exc

    def _wait_for_lock(self, conn: sqlite3.Connection, wait: bool) -> None:
        """Set how long sqlite waits for another process's lock: the
        configured ``busy_timeout``, or not at all (on an event loop's thread).
        Set only when it changes: a lone append's commit on the loop leaves it
        at 0 for the next one, and the worker thread's next call puts it back."""
        busy_ms = round(self._busy_timeout * 1000) if wait else 0
        if busy_ms != self._busy_ms:
            conn.execute(f"PRAGMA busy_timeout={busy_ms}")
            self._busy_ms = busy_ms
