"""What a query process and its caller say to each other over their pipe.

Each message is one frame of msgpack (a map with an ``op``); a table follows
as frames of Arrow IPC, one record batch each, ended by an empty frame.
Errors cross as their agentlog type name, message and plain attributes, and
are rebuilt as the same type on the other side. Nothing is ever unpickled:
the query process runs SQL it was sent, and what it answers is data only.

The connection is a ``multiprocessing.connection.Connection`` over one end of
a socket pair, which frames the bytes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

import msgpack
import pyarrow as pa

from agentlog.errors import AgentlogError

__all__ = [
    "decode_error",
    "encode_error",
    "receive",
    "receive_table",
    "send",
    "send_table",
    "size_bytes",
]

_PLAIN = (str, int, float, bool, type(None))


def send(conn: Connection, op: str, **fields: Any) -> None:
    """One message: ``op`` and ``fields`` (builtin values and bytes only)."""
    conn.send_bytes(msgpack.packb({"op": op, **fields}, use_bin_type=True))


def receive(conn: Connection) -> dict[str, Any]:
    """The next message. Raises EOFError once the other side is gone."""
    message = msgpack.unpackb(conn.recv_bytes(), raw=False)
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise EOFError("the query process sent something that is not a message")
    return message


def send_table(conn: Connection, table: pa.Table) -> None:
    """``table`` as IPC frames, one batch each (the schema alone if it has none)."""
    batches = table.to_batches() or [None]
    for batch in batches:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            if batch is not None:
                writer.write_batch(batch)
        conn.send_bytes(sink.getvalue())
    conn.send_bytes(b"")


def receive_table(conn: Connection) -> pa.Table:
    """The table :func:`send_table` sent."""
    schema: pa.Schema | None = None
    batches: list[pa.RecordBatch] = []
    for frame in _frames(conn):
        reader = pa.ipc.open_stream(frame)
        schema = reader.schema
        batches.extend(reader)
    if schema is None:
        raise EOFError("the query process sent a table without a schema")
    return pa.Table.from_batches(batches, schema=schema)


def _frames(conn: Connection) -> Iterator[bytes]:
    while frame := conn.recv_bytes():
        yield frame


def encode_error(exc: BaseException) -> dict[str, Any]:
    """``exc`` as data: its type name, its message, and its plain attributes."""
    attrs = {
        name: value
        for name, value in vars(exc).items()
        if isinstance(value, _PLAIN)
        or (isinstance(value, list) and all(isinstance(v, _PLAIN) for v in value))
    }
    return {"type": type(exc).__name__, "message": str(exc), "attrs": attrs}


def decode_error(data: dict[str, Any]) -> Exception:
    """The error :func:`encode_error` described: the same agentlog type, message
    and attributes; a RuntimeError for anything else (a bug, not the query's)."""
    message = str(data.get("message", ""))
    kind = _agentlog_types().get(str(data.get("type")))
    if kind is None:
        return RuntimeError(f"{data.get('type')}: {message}")
    error = kind.__new__(kind)
    Exception.__init__(error, message)
    attrs = data.get("attrs")
    if isinstance(attrs, dict):
        error.__dict__.update(attrs)
    return error


def _agentlog_types() -> dict[str, type[AgentlogError]]:
    found: dict[str, type[AgentlogError]] = {}
    todo: list[type[AgentlogError]] = [AgentlogError]
    while todo:
        kind = todo.pop()
        found.setdefault(kind.__name__, kind)
        todo.extend(kind.__subclasses__())
    return found


_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*(bytes|b|[kmgtp]i?b)?\s*", re.IGNORECASE)


def size_bytes(text: str) -> int:
    """A DuckDB size (``100MB``, ``1GiB``, or ``95.3 MiB`` as DuckDB writes its
    setting) in bytes: KB, MB... are powers of 1000, KiB, MiB... of 1024.

    Raises:
        ValueError: not a size.
    """
    found = _SIZE.fullmatch(text)
    if found is None:
        raise ValueError(f"not a size: {text!r}")
    number, unit = float(found.group(1)), (found.group(2) or "b").lower()
    if unit in ("b", "bytes"):
        return int(number)
    base = 1024 if unit[1] == "i" else 1000
    return int(number * base ** ("kmgtp".index(unit[0]) + 1))
