"""Values to and from Redis: run index hashes, stream entries and snapshots.

The layout is described in :mod:`agentlog.eventlog.redis._schema`. Events
are encoded and checked exactly as SQLite stores them
(:mod:`agentlog.eventlog._row_format`: :func:`~agentlog.eventlog._row_format.event_row`
and :func:`~agentlog.eventlog._row_format.event_from_row`): same payload
codec, same encryption, same checksum over the same fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import msgpack

from agentlog.crypto import PayloadCipher
from agentlog.errors import CorruptEventError
from agentlog.eventlog._base import RunInfo, Snapshot
from agentlog.eventlog._row_format import TIME_FIELDS, event_from_row, from_us, to_us
from agentlog.eventlog.events import Event

__all__ = [
    "event_args",
    "event_from_entry",
    "info_from_hash",
    "snapshot_blob",
    "snapshot_from_blob",
    "time_arg",
]

_FIELDS = {f.name: f for f in dataclasses.fields(RunInfo)}
_INT_FIELDS = frozenset({"last_seq", "steps", "writer_epoch", "priority"})


def info_from_hash(run_id: str, raw: Mapping[bytes, bytes]) -> RunInfo:
    """A run index hash (HGETALL) as a RunInfo; fields it lacks keep their defaults."""
    values: dict[str, Any] = {"run_id": run_id}
    for key, value in raw.items():
        name = key.decode()
        if name not in _FIELDS or name == "run_id":
            continue
        text = value.decode()
        if name in _INT_FIELDS:
            values[name] = int(text)
        elif name in TIME_FIELDS:
            values[name] = from_us(int(text))
        elif name == "archived":
            values[name] = text == "1"
        else:
            values[name] = text
    return RunInfo(**values)


def time_arg(moment: Any) -> str:
    """A time as a script argument: microseconds, or '' for None."""
    return "" if moment is None else str(to_us(moment))


def event_args(row: tuple[Any, ...]) -> list[Any]:
    """The per-event script arguments of an :func:`event_row`: seq, type, ts,
    schema_v, payload, checksum (the run id and epoch are the batch's)."""
    _run_id, seq, event_type, ts, schema_v, _epoch, payload, checksum = row
    return [seq, event_type, ts, schema_v, payload, checksum]


def event_from_entry(
    run_id: str,
    entry_id: bytes,
    fields: Mapping[bytes, bytes],
    where: str,
    cipher: PayloadCipher | None,
) -> Event:
    """Verify and decode one stream entry.

    Raises:
        CorruptEventError: naming the run and seq.
    """
    seq = int(entry_id.split(b"-", 1)[0])
    try:
        row = (
            seq,
            fields[b"t"].decode(),
            int(fields[b"ts"]),
            int(fields[b"v"]),
            int(fields[b"e"]),
            fields[b"p"],
            int(fields[b"c"]),
        )
    except (KeyError, ValueError, UnicodeDecodeError) as exc:
        raise CorruptEventError(
            run_id, seq, f"bad stream entry {entry_id!r}: {exc!r} (not written by agentlog)", where
        ) from exc
    return event_from_row(run_id, row, where, cipher)


def snapshot_blob(snapshot: Snapshot) -> bytes:
    """A (sealed) snapshot as its hash value."""
    blob: bytes = msgpack.packb(
        [to_us(snapshot.created_at, "created_at"), snapshot.base_seq, snapshot.state],
        use_bin_type=True,
    )
    return blob


def snapshot_from_blob(run_id: str, seq: int, blob: bytes, where: str) -> Snapshot:
    """The stored snapshot of :func:`snapshot_blob` (still sealed, if it was).

    Raises:
        CorruptEventError: the blob does not decode (naming run and seq).
    """
    try:
        created, base_seq, state = msgpack.unpackb(blob, raw=False)
        return Snapshot(run_id, seq, bytes(state), from_us(int(created)), int(base_seq))
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise CorruptEventError(run_id, seq, f"bad snapshot record: {exc}", where) from exc
