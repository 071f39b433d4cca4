"""Queries in a process of their own, whose memory has a hard bound.

DuckDB's ``memory_limit`` binds its buffer manager, not everything a query
allocates: it builds up to 2,048 rows at a time outside it, so ``SELECT
repeat('x', 1500000) FROM range(1001)`` under a 100 MB limit made the process
that ran it hold about 1.7 GB. ``agentlog sql`` and the UI's SQL page
therefore run each query in a query process (:mod:`agentlog.archive._sql_worker`)
whose data segment is capped (``RLIMIT_DATA``, on Linux) at
:func:`~agentlog.archive._sql_worker.query_bound`: the memory limit, the hot
events it is handed, and a fixed overhead. A query that reaches the bound
fails there with :class:`~agentlog.archive._errors.SqlLimitError` (``limit ==
"memory"``, naming the flag that raises it); the caller's process only ever
holds the rows it asked for.

The caller gathers what the views read (:func:`~agentlog.archive._sql.sql_source`:
it holds the hot log), sends it over a socket pair with the query, and
answers the query process's requests for data keys from its own key store:
keys cross only that socket, never an argument, the environment or a file.
The query process gets neither ``AGENTLOG_KEYRING`` nor anything else that
names a key store.

Starting a process costs about a second (Python, DuckDB and Arrow load), so
:class:`QueryProcesses` keeps one ready and reuses it while it stays small; a
process that grew (allocators keep what they freed) is retired after its query.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TypedDict, Unpack

import pyarrow as pa

from agentlog.archive._errors import ArchiveQueryError, SqlLimitError
from agentlog.archive._sql import SqlSource
from agentlog.archive._sql_views import VIEWS
from agentlog.archive._sql_wire import decode_error, encode_error, receive, receive_table, send
from agentlog.crypto import ENV_VAR, PayloadCipher

__all__ = ["QueryOptions", "QueryProcess", "QueryProcesses", "run_query"]

#: How long a new query process may take to load and build its views; a bound
#: for a process that hangs, far above the second or two it takes.
_START_SECONDS = 300.0

_SRC = str(Path(__file__).resolve().parents[2])  # where this agentlog is imported from


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def _environment() -> dict[str, str]:
    """The caller's environment, this agentlog first on the path, no key store
    named, and Arrow on the system allocator."""
    env = {name: value for name, value in os.environ.items() if name != ENV_VAR}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_SRC, env.get("PYTHONPATH", "")]))
    # mimalloc, Arrow's default, maps about 1 GB it may never use: the bound would count it.
    env["ARROW_DEFAULT_MEMORY_POOL"] = "system"
    return env


class QueryProcess:
    """One query process: runs one query at a time; :meth:`kill` stops it from any thread."""

    def __init__(self) -> None:
        """Start the process (it loads in the background; :meth:`run` waits for it)."""
        mine, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "agentlog.archive._sql_worker", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                env=_environment(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        finally:
            theirs.close()
        self._conn = Connection(mine.detach())
        #: When the running query began executing (monotonic); None until then.
        self.started_at: float | None = None
        #: Whether the process may run another query (it stayed small, and lives).
        self.reusable = True
        self._killed = False

    @property
    def pid(self) -> int:
        """The process id."""
        return self._proc.pid

    def run(
        self,
        source: SqlSource,
        cipher: PayloadCipher | None,
        query: str,
        *,
        memory_limit: str = "",
        threads: int = 0,
        limit: int | None = None,
        max_bytes: int | None = None,
    ) -> tuple[pa.Table, bool]:
        """Run ``query`` over ``source``; return its rows (the first ``limit``, or
        all) and whether it had more, as :meth:`ArchiveSQL.head` does.

        Raises:
            SqlLimitError: the query reached its memory bound (also when that
                ended the process) or ``max_bytes``.
            ArchiveQueryError: DuckDB refused the query, or :meth:`kill` stopped it.
        """
        self.started_at = None
        send(
            self._conn,
            "query",
            query=query,
            memory_limit=memory_limit,
            threads=threads,
            setup=list(source.setup),
            files=list(source.files),
            tables=list(source.tables),
            split_runs=list(source.split_runs),
            hot=_ipc(source.hot),
            keys=cipher.keys.store.description if cipher is not None else None,
            limit=limit,
            max_bytes=max_bytes,
        )
        table, more, failure = None, False, None
        try:
            while True:
                if self.started_at is None and not self._conn.poll(_START_SECONDS):
                    self.kill()
                message = receive(self._conn)
                op = message["op"]
                if op in ("key", "sealed_from"):
                    self._answer(cipher, message)
                elif op == "running":
                    self.started_at = time.monotonic()
                elif op == "result":
                    more = bool(message["more"])
                    table = receive_table(self._conn)
                elif op == "failed":
                    failure = decode_error(message["error"])
                elif op == "done":
                    self.reusable = bool(message["reusable"])
                    break
        except (EOFError, OSError) as exc:
            self.reusable = False
            raise self._ended(query, memory_limit) from exc
        if failure is not None:
            raise failure
        assert table is not None
        return table, more

    def _answer(self, cipher: PayloadCipher | None, message: dict[str, Any]) -> None:
        """A data key, or whether a run is sealed, from this process's key store."""
        run_id = str(message["run_id"])
        try:
            if cipher is None:
                raise RuntimeError("the query process asked for a key it was not offered")
            if message["op"] == "key":
                key = cipher.keys.for_open(run_id)
                fields = {
                    "data_key_id": key.data_key_id,
                    "kek_id": key.kek_id,
                    "plaintext": key.plaintext,
                    "sealed_from": key.sealed_from,
                }
                send(self._conn, "reply", key=fields)
            else:
                send(self._conn, "reply", sealed_from=cipher.keys.sealed_from(run_id))
        except Exception as exc:  # ShreddedError, KeyStoreUnavailableError...: the query's to raise
            send(self._conn, "reply", error=encode_error(exc))

    def _ended(self, query: str, memory_limit: str) -> Exception:
        """Why the process went away in the middle of a query."""
        try:
            code = self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            code = self._proc.wait()
        if self._killed:
            return ArchiveQueryError(query, "the query was stopped", VIEWS)
        how = f"signal {-code}" if code < 0 else f"exit code {code}"
        if self.started_at is None:
            return ArchiveQueryError(
                query,
                f"the query process ended before the query started ({how}); check that "
                f"{sys.executable} can import agentlog, duckdb and pyarrow",
                VIEWS,
            )
        limit = memory_limit or "(DuckDB's default, 80% of the RAM)"
        return SqlLimitError(
            query,
            "memory",
            f"the query's process ended while it ran ({how}), which happens when it reaches "
            f"its memory bound (the limit of {limit} plus a fixed overhead). Narrow the "
            "query (a WHERE, fewer or shorter columns, a LIMIT) or raise the limit: "
            "`agentlog ui --sql-memory-limit`, `agentlog sql --memory-limit`",
            VIEWS,
        )

    def kill(self) -> None:
        """Stop the process, and the query it runs, now (safe from any thread)."""
        self._killed = True
        self.reusable = False
        self._proc.kill()

    def close(self) -> None:
        """End the process: it exits once its socket closes; killed if it does not."""
        self._conn.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


class QueryProcesses:
    """Query processes kept ready: a query takes one, and gives it back after.

    Thread-safe. Closing ends the idle ones; one given back after that ends too.
    """

    def __init__(self, ready: int = 1) -> None:
        """Keep up to ``ready`` idle processes (started on the first query)."""
        self.ready = ready
        self._idle: list[QueryProcess] = []
        self._lock = threading.Lock()
        self._closed = False

    def take(self) -> QueryProcess:
        """An idle process, or a new one."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return QueryProcess()

    def give_back(self, process: QueryProcess) -> None:
        """Keep ``process`` for the next query if it may run one; else end it and
        start its replacement, so that the next query does not wait for one."""
        with self._lock:
            keep = process.reusable and not self._closed and len(self._idle) < self.ready
            if keep:
                self._idle.append(process)
            refill = not self._closed and not self._idle
        if not keep:
            process.close()
        if refill:
            fresh = QueryProcess()
            with self._lock:
                if self._closed:
                    fresh.close()
                else:
                    self._idle.append(fresh)

    def close(self) -> None:
        """End the idle processes."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for process in idle:
            process.close()

    def __enter__(self) -> QueryProcesses:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class QueryOptions(TypedDict, total=False):
    """How :func:`run_query` runs a query: :meth:`QueryProcess.run`'s keyword
    arguments, passed through as they are (each optional, with its default there)."""

    memory_limit: str
    threads: int
    limit: int | None
    max_bytes: int | None


def run_query(
    source: SqlSource,
    cipher: PayloadCipher | None,
    query: str,
    *,
    processes: QueryProcesses | None = None,
    **options: Unpack[QueryOptions],
) -> tuple[pa.Table, bool]:
    """Run ``query`` in a query process (one of ``processes``, or one of its own).

    See :meth:`QueryProcess.run` for the arguments, the answer and the errors.
    """
    process = processes.take() if processes is not None else QueryProcess()
    try:
        return process.run(source, cipher, query, **options)
    finally:
        if processes is not None:
            processes.give_back(process)
        else:
            process.close()
