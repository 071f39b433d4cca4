"""Reads served on the calling thread, from read-only connections to the file.

The log's worker thread owns the connection that writes (see
:mod:`agentlog.eventlog.sqlite._log`); a read sent there costs a hop to that
thread and back (about 100 µs on a loaded machine) around a query that takes
tens of microseconds. In WAL mode SQLite lets any number of readers run
beside the one writer, each reading the last committed state, so the small
reads (a run's index row, its latest snapshot, a resume's tail) are served
here instead, on the thread that asks, from a read-only connection that
thread owns (sqlite3 connections are not shared between threads). Nothing
is lost by it: every append a caller has seen succeed has committed, and a
read sees every commit made before it starts.

A read may race another thread's :meth:`ReadConnections.close` (an
``AgentlogSaver`` closing while a caller's ``get_tuple`` reads). Closing a
connection that another thread is executing on crashes CPython's sqlite3
(3.11: a segfault), so close() closes only the connections no read is
using; a read running then closes its own when it ends. A read that starts
after close() raises the log's closed error.

A read run here blocks the calling thread (the event loop) for the query's
own time, as the decoding of its rows already does; the indexed read path
fetches the batches after a read's first from the worker thread, so a long
read still overlaps fetching and folding (:mod:`agentlog.eventlog._indexed`).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from agentlog.errors import BackendUnavailableError

__all__ = ["ReadConnections"]


class ReadConnections:
    """One read-only connection to a file per thread that reads it, and a pool
    lent to threads that come and go (:meth:`query_pooled`).

    Args:
        path: the database file (already opened, and migrated, by the writer's
            connection).
        busy_timeout: seconds a read waits for a lock (a WAL reader waits only
            while another process recovers or checkpoints the WAL).
        immutable_fallback: the file is opened read-only; where a plain
            read-only connection cannot open it (no -shm can be made beside it),
            open it as immutable, as the writer's connection then did.
        unavailable: turns a sqlite error into the log's typed error.
        closed_error: the log's typed error for a read after :meth:`close`.
        writable: the connection :meth:`open_here` opens may write (it never
            does: it reads only). Closed last, it checkpoints the WAL into
            the file and removes it, as the writer's does, when the log was
            only read and its writing connection never opened.
    """

    def __init__(
        self,
        path: str,
        *,
        busy_timeout: float,
        immutable_fallback: bool,
        unavailable: Callable[[BaseException, str], BackendUnavailableError],
        closed_error: Callable[[], BackendUnavailableError],
        writable: bool = False,
    ) -> None:
        self._target = f"file:{quote(os.path.abspath(path))}?mode=ro"
        self._writable = writable
        self._busy_timeout = busy_timeout
        self._immutable_fallback = immutable_fallback
        self._unavailable = unavailable
        self._closed_error = closed_error
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._idle: list[sqlite3.Connection] = []  # lent by query_pooled, one thread at a time
        self._lock = threading.Lock()
        self._closed = False
        #: The connections a read is running on (close() leaves them to it).
        self._busy: set[sqlite3.Connection] = set()
        #: ``PRAGMA user_version`` as the last connection opened read it.
        self.schema_version = 0

    def _connect(self, target: str) -> sqlite3.Connection:
        # check_same_thread=False only so that close() can close every thread's
        # connection; each is used by the thread that opened it and no other.
        return sqlite3.connect(
            target,
            uri=True,
            timeout=self._busy_timeout,
            isolation_level=None,
            check_same_thread=False,
        )

    def _open(self, target: str | None = None) -> sqlite3.Connection:
        conn = self._new(target)
        self._local.conn = conn
        return conn

    def _new(self, target: str | None = None) -> sqlite3.Connection:
        """A new connection, registered so that :meth:`close` closes it."""
        try:
            conn = self._connect(target or self._target)
            # The first read: a WAL file that cannot be read fails here.
            self.schema_version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        except sqlite3.Error as exc:
            if not self._immutable_fallback:
                raise self._unavailable(exc, "cannot open a read connection") from exc
            try:
                conn = self._connect(self._target + "&immutable=1")
            except sqlite3.Error as again:
                raise self._unavailable(again, "cannot open a read connection") from again
        with self._lock:
            if self._closed:
                conn.close()
                raise self._closed_error()
            self._opened.append(conn)
        return conn

    def open_here(self) -> int:
        """Open this thread's connection now (the log's opener does it, so a
        first read does not pay for it); the file's schema version."""
        if getattr(self._local, "conn", None) is None:
            self._open(self._target.replace("mode=ro", "mode=rw") if self._writable else None)
        return self.schema_version

    def query(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        """Rows of a read, on this thread, with sqlite errors translated.

        Each statement runs in its own read transaction, which ends when its
        rows are fetched, so no reader holds back a WAL checkpoint.
        """
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        return self._rows(conn if conn is not None else self._open(), sql, params)

    def query_here(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        """:meth:`query` on a thread that has its connection (the opener's, the
        loop's), else :meth:`query_pooled`: no connection kept for a thread
        that reads once."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return self._rows(conn, sql, params)
        return self.query_pooled(sql, params)

    def query_pooled(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        """Rows of a read, on this thread, from a connection lent for the read.

        For threads that come and go (a caller's, not the loop's): a pool of
        connections, one per read running at once, each used by one thread at
        a time, instead of one per thread that ever read, kept until close.
        """
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._new()
        return self._rows(conn, sql, params, pooled=True)

    def _rows(
        self,
        conn: sqlite3.Connection,
        sql: str,
        params: Sequence[Any] | Mapping[str, Any],
        *,
        pooled: bool = False,
    ) -> list[Any]:
        """Rows of a read on ``conn``, marked busy while it runs (see :meth:`close`);
        a pooled connection goes back to the pool after.

        No lock on the way in: the read marks the connection busy, then checks
        that the log is open, while close() marks the log closed, then takes the
        connections not busy (each step atomic under the GIL). So either close()
        leaves this connection to the read, or the read sees the log closed and
        runs nothing on it."""
        busy = self._busy
        busy.add(conn)
        try:
            if self._closed:
                raise self._closed_error()
            return conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._unavailable(exc, "read failed") from exc
        finally:
            busy.discard(conn)
            if pooled or self._closed:
                self._after_read(conn, pooled)

    def _after_read(self, conn: sqlite3.Connection, pooled: bool) -> None:
        """Back to the pool, or closed here if close() ran during the read and
        left it to the read."""
        with self._lock:
            left = self._closed and conn in self._opened
            if left:
                self._opened.remove(conn)
            elif pooled and not self._closed:
                self._idle.append(conn)
        if left:
            conn.close()

    def close(self) -> None:
        """Close every thread's connection, the opener's last, so that it
        checkpoints the WAL if it may write; a connection a read is running on
        is closed by that read when it ends (see the module docstring)."""
        with self._lock:
            self._closed = True  # before the busy ones are taken: see _rows
            self._idle.clear()
            idle = [conn for conn in self._opened if conn not in self._busy]
            self._opened = [conn for conn in self._opened if conn not in idle]
        for conn in reversed(idle):
            conn.close()
