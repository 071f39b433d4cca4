"""msgpack with builtin types only (never pickle, never a class path), and checksums.

The encoding table and the reasons are in :mod:`agentlog.eventlog.codec`,
which re-exports everything here; this module holds the bytes-level half so
that :mod:`agentlog.eventlog._sealing` can use it without importing the codec.
"""

from __future__ import annotations

import base64
import threading
import uuid
import zlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import msgpack
import xxhash

from agentlog.errors import CorruptEventError, NotSerializableError

__all__ = [
    "MAX_DEPTH",
    "MAX_INFLATED",
    "PACK_ERRORS",
    "checksum",
    "inflate",
    "jsonable",
    "pack",
    "pack_each",
    "pack_pair",
    "thread_packer",
    "trim_packer",
    "unpack",
]

_EXT_UUID = 1
_EXT_DECIMAL = 2


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
    # Read-only views (a step writing back part of ctx.state) are stored as
    # the dict or list they show; they read back as plain dicts and lists.
    if isinstance(obj, Mapping):
        return dict(obj)
    if isinstance(obj, Sequence) and not isinstance(obj, str | bytes | bytearray):
        return list(obj)
    raise TypeError(type(obj).__name__)


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _EXT_UUID:
        return uuid.UUID(bytes=data)
    if code == _EXT_DECIMAL:
        return Decimal(data.decode("ascii"))
    raise ValueError(f"unknown msgpack extension type {code}")


#: msgpack's own nesting limit (its packer's default recursion limit).
MAX_DEPTH = 511

#: The most bytes one compressed part of a stored snapshot may expand to. A
#: crafted part (a "zip bomb") could otherwise exhaust memory when it is read.
MAX_INFLATED = 256 * 1024 * 1024


def inflate(data: bytes, run_id: str, seq: int, limit: int = MAX_INFLATED) -> bytes:
    """Decompress zlib ``data`` of ``run_id``'s snapshot at ``seq``, at most ``limit`` bytes.

    Raises:
        CorruptEventError: not zlib data, cut short, or larger than ``limit``
            once decompressed (nothing past the limit is ever held in memory).
    """
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, limit)
    except zlib.error as exc:
        raise CorruptEventError(run_id, seq, f"a compressed part does not inflate ({exc})") from exc
    if inflater.unconsumed_tail:
        raise CorruptEventError(
            run_id, seq, f"a compressed part inflates past the limit of {limit:,} bytes"
        )
    if not inflater.eof:
        raise CorruptEventError(run_id, seq, "a compressed part is cut short")
    return out


#: What msgpack's Packer raises for a value it cannot carry: a caller that
#: packs with it directly catches these and calls :func:`pack`, which names
#: the bad part (BufferError: a memoryview that is not C-contiguous).
PACK_ERRORS = (TypeError, ValueError, OverflowError, RecursionError, BufferError)

#: A memoryview msgpack cannot read as one run of bytes (``view[::2]``).
_STRIDED_VIEW = "a memoryview that is not C-contiguous (pass bytes(view))"


def _find_unserializable(value: Any, path: str) -> tuple[str, str] | None:
    """Name the first thing msgpack cannot carry (slow path, after a failure).

    Iterative, so a value that contains itself or is nested thousands of
    levels deep is reported like any other bad value, never a RecursionError.
    """
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if item is None or isinstance(
            item, bool | int | float | str | bytes | bytearray | uuid.UUID | Decimal
        ):
            continue
        if isinstance(item, memoryview):  # packed as its bytes, read back as bytes
            try:
                contiguous = item.c_contiguous
            except ValueError:  # released: its attributes cannot be read
                return (where, "a released memoryview (pass bytes(view) before releasing it)")
            if not contiguous:
                return (where, _STRIDED_VIEW)
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


#: One msgpack Packer per thread: ``msgpack.packb`` makes a new one per call,
#: which costs more than packing a small payload. A Packer is not thread-safe.
_PACKERS = threading.local()
#: A Packer keeps a buffer the size of the largest value it packed: past this,
#: the thread's Packer is dropped, so a rare huge value does not stay in memory.
_KEEP_BUFFER = 1 << 20


def thread_packer() -> msgpack.Packer:
    """This thread's msgpack Packer (:func:`pack`'s): for a loop that packs small
    maps. It raises as msgpack does; :func:`pack` names a bad value's part."""
    return _packer()


def trim_packer(largest: int) -> None:
    """Drop this thread's Packer if the largest value it packed since :func:`thread_packer`
    was ``largest`` bytes, past the buffer it may keep."""
    if largest > _KEEP_BUFFER:
        _PACKERS.packer = None


def _packer() -> msgpack.Packer:
    packer: msgpack.Packer | None = getattr(_PACKERS, "packer", None)
    if packer is None:
        packer = _PACKERS.packer = msgpack.Packer(default=_default, use_bin_type=True)
    return packer


def pack(value: Any, *, path: str = "value") -> bytes:
    """Encode a builtin value; raise NotSerializableError naming the bad part."""
    try:
        raw: bytes = _packer().pack(value)  # its buffer is reset after an error too
    except PACK_ERRORS as exc:
        found = _find_unserializable(value, path)
        where, what = found if found else (path, str(exc))
        raise NotSerializableError(where, what) from exc
    if len(raw) > _KEEP_BUFFER:
        _PACKERS.packer = None
    return raw


def pack_each(values: Sequence[Any], paths: Sequence[str]) -> list[bytes]:
    """:func:`pack` of each value, the same bytes, at a batch's cost: one
    look-up of the thread's Packer (the payloads of one append, where a
    look-up and a call per payload show)."""
    out: list[bytes] = []
    packer = _packer()
    largest = 0
    for value, path in zip(values, paths, strict=True):
        try:
            raw: bytes = packer.pack(value)
        except PACK_ERRORS:
            raw = pack(value, path=path)  # raises naming the bad part
        out.append(raw)
        largest = max(largest, len(raw))
    trim_packer(largest)
    return out


def pack_pair(first: Any, second: Any, *, path: str = "value") -> tuple[bytes, bytes]:
    """:func:`pack` of two values: an event's metadata and its content, packed
    apart so the content can be sealed (the per-event path of a sealed append)."""
    return pack(first, path=path), pack(second, path=path)


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


def checksum(*parts: bytes) -> int:
    """The xxHash3-64 checksum of ``parts`` concatenated, as an unsigned int."""
    digest = xxhash.xxh3_64()
    for part in parts:
        digest.update(part)
    return digest.intdigest()
