"""The msgpack codec: builtin types only, never pickle, never a class path.

What can be stored, and how:

==================  ===========================================================
Python value        msgpack encoding
==================  ===========================================================
None, bool, int,    native msgpack types
float, str, bytes
list, tuple         array (a tuple reads back as a list)
dict                map (keys: str, int or bytes)
datetime (aware)    the standard Timestamp extension (-1); reads back as UTC
UUID                extension 1: the 16 raw bytes
Decimal             extension 2: its ``str()`` in ASCII
==================  ===========================================================

Anything else raises :class:`~agentlog.errors.NotSerializableError` naming
the path to the bad value. Decoding never imports or instantiates a class
named in stored bytes: the event type is looked up in a fixed table
(:data:`~agentlog.eventlog.events.EVENT_TYPES`), which is what keeps a
tampered log from running code (LangGraph's CVE-2026-28277 was exactly that).

Schema changes: a payload written at schema version ``v`` is passed through
``UPCASTERS[v]``, ``UPCASTERS[v+1]``, ... up to :data:`SCHEMA_V`. Each
upcaster is a small pure function ``(type, payload) -> payload``, and each
ships with a golden log fixture in ``tests/golden/`` that must keep
replaying to the same state.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import msgpack

from agentlog.errors import CorruptEventError, NotSerializableError, UnknownEventTypeError
from agentlog.eventlog.events import EVENT_TYPES, SCHEMA_V, Event, EventData

__all__ = [
    "UPCASTERS",
    "Upcaster",
    "decode_event",
    "decode_payload",
    "encode_event",
    "encode_payload",
    "jsonable",
    "pack",
    "unpack",
]

_EXT_UUID = 1
_EXT_DECIMAL = 2

#: ``(event type, payload at v) -> payload at v + 1``.
Upcaster = Callable[[str, dict[str, Any]], dict[str, Any]]

#: Upcaster from schema version ``v`` to ``v + 1``, keyed by ``v``.
UPCASTERS: dict[int, Upcaster] = {}


def _default(obj: Any) -> Any:
    if isinstance(obj, datetime):
        if obj.tzinfo is None:
            raise TypeError("naive datetime")
        # astimezone fails here, at write time, for an instant past year 9999 in
        # UTC; otherwise it would be written and then never read back.
        return msgpack.Timestamp.from_datetime(obj.astimezone(UTC))
    if isinstance(obj, uuid.UUID):
        return msgpack.ExtType(_EXT_UUID, obj.bytes)
    if isinstance(obj, Decimal):
        return msgpack.ExtType(_EXT_DECIMAL, str(obj).encode("ascii"))
    raise TypeError(type(obj).__name__)


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _EXT_UUID:
        return uuid.UUID(bytes=data)
    if code == _EXT_DECIMAL:
        return Decimal(data.decode("ascii"))
    raise ValueError(f"unknown msgpack extension type {code}")


#: msgpack's own nesting limit (its packer's default recursion limit).
MAX_DEPTH = 511


def _find_unserializable(value: Any, path: str) -> tuple[str, str] | None:
    """Name the first thing msgpack cannot carry (slow path, after a failure).

    Iterative, so a value that contains itself or is nested thousands of
    levels deep is reported like any other bad value, never a RecursionError.
    """
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if item is None or isinstance(item, bool | int | float | str | bytes | uuid.UUID | Decimal):
            continue
        if isinstance(item, datetime):
            if item.tzinfo is None:
                return (where, "naive datetime")
            continue
        if depth >= MAX_DEPTH and isinstance(item, list | tuple | dict):
            short = where if len(where) <= 120 else f"{where[:60]}...{where[-40:]}"
            return (short, f"a value nested deeper than {MAX_DEPTH} levels (or containing itself)")
        if isinstance(item, list | tuple):
            children = [(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(item)]
        elif isinstance(item, dict):
            children = []
            for key, v in item.items():
                if not isinstance(key, str | int | bytes):
                    return (f"{where} key {key!r}", type(key).__name__)
                children.append((v, f"{where}[{key!r}]", depth + 1))
        else:
            return (where, type(item).__name__)
        stack.extend(reversed(children))  # depth-first, in order: the first bad value wins
    return None


def pack(value: Any, *, path: str = "value") -> bytes:
    """Encode a builtin value; raise NotSerializableError naming the bad part."""
    try:
        return msgpack.packb(value, default=_default, use_bin_type=True)  # type: ignore[no-any-return]
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        found = _find_unserializable(value, path)
        where, what = found if found else (path, str(exc))
        raise NotSerializableError(where, what) from exc


def _hashable(key: Any) -> Any:
    return tuple(_hashable(item) for item in key) if isinstance(key, list) else key


def _map_with_tuple_keys(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    return {_hashable(key): value for key, value in pairs}


def unpack(raw: bytes) -> Any:
    """Decode bytes written by :func:`pack`. Raises ValueError on bad bytes."""
    try:
        return msgpack.unpackb(
            raw, raw=False, ext_hook=_ext_hook, timestamp=3, strict_map_key=False
        )
    except ValueError:
        raise
    except TypeError as exc:
        if "unhashable" not in str(exc):
            raise ValueError(f"{type(exc).__name__}: {exc}") from exc
        # msgpack packs a tuple key as an array, which reads back as an
        # unhashable list: read such keys back as tuples (the slow path only).
        try:
            return msgpack.unpackb(
                raw,
                raw=False,
                ext_hook=_ext_hook,
                timestamp=3,
                strict_map_key=False,
                object_pairs_hook=_map_with_tuple_keys,
            )
        except Exception as retry_exc:  # msgpack raises several unrelated types
            raise ValueError(f"{type(retry_exc).__name__}: {retry_exc}") from retry_exc
    except Exception as exc:  # msgpack raises several unrelated types
        raise ValueError(f"{type(exc).__name__}: {exc}") from exc


def jsonable(value: Any) -> Any:
    """A JSON-ready rendering of a codec value, for people and SQL.

    bytes become base64 text, datetimes ISO 8601, UUIDs and Decimals their
    string form, and map keys strings. It is one-way: the msgpack bytes stay
    the record.
    """
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def encode_payload(data: EventData) -> bytes:
    """The payload of an event as msgpack bytes (a map of its fields)."""
    return pack(data.to_dict(), path=data.type)


def decode_payload(
    event_type: str,
    schema_v: int,
    raw: bytes,
    *,
    run_id: str | None = None,
    seq: int | None = None,
    where: str = "",
) -> EventData:
    """Rebuild a payload from stored bytes, upcasting it to :data:`SCHEMA_V`.

    Raises:
        UnknownEventTypeError: the type is not in the vocabulary.
        CorruptEventError: the bytes do not decode, or do not fit the type.
    """
    try:
        fields = unpack(raw)
    except ValueError as exc:
        raise CorruptEventError(run_id, seq, f"payload does not decode: {exc}", where) from exc
    return _build_payload(event_type, schema_v, fields, run_id, seq, where)


def _build_payload(
    event_type: str, schema_v: int, fields: Any, run_id: str | None, seq: int | None, where: str
) -> EventData:
    cls = EVENT_TYPES.get(event_type)
    if cls is None:
        raise UnknownEventTypeError(run_id, seq, f"unknown event type {event_type!r}", where)
    if not 1 <= schema_v <= SCHEMA_V:
        raise CorruptEventError(
            run_id, seq, f"schema version {schema_v} is not in 1..{SCHEMA_V}", where
        )
    if not isinstance(fields, dict):
        raise CorruptEventError(run_id, seq, "payload is not a map", where)
    for version in range(schema_v, SCHEMA_V):
        fields = UPCASTERS[version](event_type, fields)
    try:
        return cls(**fields)
    except TypeError as exc:
        raise CorruptEventError(
            run_id, seq, f"payload does not fit {event_type}: {exc}", where
        ) from exc


def encode_event(event: Event) -> bytes:
    """The whole envelope as one msgpack array (the Kafka record value)."""
    return pack(
        [
            event.run_id,
            event.seq,
            event.type,
            event.ts,
            event.schema_v,
            event.writer_epoch,
            event.data.to_dict(),
        ],
        path=f"{event.type}",
    )


def decode_event(raw: bytes, *, where: str = "") -> Event:
    """Rebuild an envelope written by :func:`encode_event`.

    Raises:
        CorruptEventError: naming the run and seq when the envelope got that
            far, and ``where`` (such as a topic, partition and offset).
    """
    try:
        items = unpack(raw)
    except ValueError as exc:
        raise CorruptEventError(None, None, f"envelope does not decode: {exc}", where) from exc
    if not isinstance(items, list) or len(items) != 7:
        raise CorruptEventError(None, None, "envelope is not a 7-item array", where)
    run_id, seq, event_type, ts, schema_v, epoch, fields = items
    if not (
        isinstance(run_id, str)
        and isinstance(seq, int)
        and isinstance(event_type, str)
        and isinstance(ts, datetime)
        and isinstance(schema_v, int)
        and isinstance(epoch, int)
    ):
        raise CorruptEventError(
            run_id if isinstance(run_id, str) else None,
            seq if isinstance(seq, int) else None,
            "envelope fields have the wrong types",
            where,
        )
    data = _build_payload(event_type, schema_v, fields, run_id, seq, where)
    return Event(run_id, seq, data, ts.astimezone(UTC), epoch)
