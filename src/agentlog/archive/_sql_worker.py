"""The query process: ``python -m agentlog.archive._sql_worker FD``.

It serves queries one at a time over the socket ``FD`` (see
:mod:`agentlog.archive._sql_wire`) until its caller closes it. For each, it
builds the views from the :class:`~agentlog.archive._sql.SqlSource` it is
sent, caps its own data segment (``RLIMIT_DATA``: the heap and every private
writable mapping, so DuckDB's chunks and Arrow's buffers alike) at the
query's bound, runs the query, sends its rows, and lifts the cap again.

Data keys never come through its arguments, its environment or a file: when
a sealed row needs one, it asks its caller over the same socket
(:class:`_PipeKeys`), which answers from its own key store.
"""

from __future__ import annotations

import gc
import resource
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

import pyarrow as pa

from agentlog.archive._sql import ArchiveSQL, SqlSource, connect, memory_error
from agentlog.archive._sql_wire import (
    decode_error,
    encode_error,
    receive,
    send,
    send_table,
    size_bytes,
)
from agentlog.crypto import DataKey, DataKeyCache, KeyStore, PayloadCipher

__all__ = ["OVERHEAD_BYTES", "THREAD_BYTES", "main", "query_bound"]

#: What the process holds beside DuckDB's memory limit: Python, DuckDB and
#: Arrow themselves (about 170 MB once loaded), the rows read, and slack.
OVERHEAD_BYTES = 512 * 1024**2

#: Per DuckDB thread: its stack and its share of the allocators' arenas.
THREAD_BYTES = 16 * 1024**2

#: A process whose data segment grew this much past where it started is
#: retired after its query (allocators keep what they freed mapped), so the
#: next query's bound is not spent on the last one's leftovers.
_RETIRE_GROWTH = 256 * 1024**2


def query_bound(memory_limit: int, threads: int, hot_bytes: int) -> int:
    """The bytes a query process may hold: DuckDB's limit, the hot events it
    was handed, and :data:`OVERHEAD_BYTES` plus :data:`THREAD_BYTES` a thread."""
    return memory_limit + hot_bytes + OVERHEAD_BYTES + THREAD_BYTES * max(threads, 1)


class _PipeKeys(KeyStore):
    """A key store that asks the caller, over the socket, for each run's data key."""

    def __init__(self, conn: Connection, description: str) -> None:
        self._conn, self._description = conn, description
        self._lock = threading.Lock()  # DuckDB may call the opener from several threads

    @property
    def description(self) -> str:
        return self._description

    def data_key(self, run_id: str) -> DataKey:
        key = self._ask("key", run_id)["key"]
        return DataKey(
            run_id, key["data_key_id"], key["kek_id"], key["plaintext"], key["sealed_from"]
        )

    def sealed_from(self, run_id: str) -> int | None:
        found: int | None = self._ask("sealed_from", run_id)["sealed_from"]
        return found

    def _ask(self, op: str, run_id: str) -> dict[str, Any]:
        with self._lock:
            send(self._conn, op, run_id=run_id)
            reply = receive(self._conn)
        if "error" in reply:
            raise decode_error(reply["error"])
        return reply


def _data_bytes() -> int:
    """This process's data segment (``VmData``), what ``RLIMIT_DATA`` counts; 0 if unknown."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _cap(soft: int | None) -> None:
    """Cap the data segment at ``soft`` bytes (None: lift the cap to the hard limit)."""
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if soft is None or (hard != resource.RLIM_INFINITY and soft > hard):
        soft = hard
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


def _run(conn: Connection, request: dict[str, Any]) -> None:
    """One query, from building its views to sending its rows (or its error)."""
    hot: bytes = request["hot"]
    keys = request.get("keys")
    query: str = request["query"]
    db: ArchiveSQL | None = None
    streaming = False
    try:
        cipher = PayloadCipher(DataKeyCache(_PipeKeys(conn, keys))) if keys else None
        rows = pa.ipc.open_stream(hot).read_all()
        source = SqlSource(
            tuple(request["setup"]),
            tuple(request["files"]),
            rows,
            tuple(request["tables"]),
            tuple(request["split_runs"]),
        )
        db = connect(
            source, cipher, memory_limit=request["memory_limit"], threads=request["threads"]
        )
        threads = int(db.conn.sql("SELECT current_setting('threads')").fetchall()[0][0])
        db.process_bound = query_bound(size_bytes(db.memory_limit), threads, len(hot))
        _cap(db.process_bound)
        send(conn, "running", bound=db.process_bound)
        limit: int | None = request["limit"]
        if limit is None:
            table, more = db.arrow(query), False
        else:
            table, more = db.head(query, limit, max_bytes=request["max_bytes"])
        send(conn, "result", more=more)
        streaming = True
        send_table(conn, table)
    except Exception as exc:  # sent to the caller, which raises it
        _cap(None)  # room to say what happened: the bound may be all spent
        if streaming:
            conn.send_bytes(b"")  # ends the table's frames; the error follows
        if isinstance(exc, MemoryError | pa.ArrowMemoryError):
            limit_text = db.memory_limit if db is not None else str(request["memory_limit"])
            exc = memory_error(query, limit_text, db.process_bound if db is not None else None)
        send(conn, "failed", error=encode_error(exc))
    finally:
        if db is not None:
            db.close()
        _cap(None)


def main(argv: list[str]) -> int:
    """Serve queries on the socket ``argv[1]`` until the caller closes it."""
    conn = Connection(int(argv[1]))
    # Arrow's default pool (mimalloc) maps about 1 GB up front, which the cap
    # would count; the system allocator maps what is used.
    pa.set_memory_pool(pa.system_memory_pool())
    start = _data_bytes()
    while True:
        try:
            request = receive(conn)
        except EOFError:
            return 0
        _run(conn, request)
        gc.collect()  # the query's tables and its keys go before the size is read
        reusable = _data_bytes() <= start + _RETIRE_GROWTH
        send(conn, "done", reusable=reusable)
        if not reusable:
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
