"""The msgpack codec: builtin types only, never pickle, never a class path.

What can be stored, and how:

==================  ===========================================================
Python value        msgpack encoding
==================  ===========================================================
None, bool, int,    native msgpack types
float, str, bytes
bytearray,          bin, as bytes (reads back as bytes); a memoryview that is
memoryview          not C-contiguous (``view[::2]``) is refused: pass ``bytes(view)``
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

Checksums: every stored event and snapshot carries an xxHash3-64 checksum,
verified on every read, so that one flipped byte on disk is a
:class:`~agentlog.errors.CorruptEventError` naming the run and seq, never a
silently wrong state. :func:`encode_event` (what the Kafka backend stores)
frames the envelope as ``[envelope bytes, checksum]``; the SQLite backend
keeps the same checksum of its columns in a column (:func:`row_checksum`).
Envelopes written before checksums existed (a bare 7-item array, such as the
golden v1 log) still decode, unverified: there is no checksum to check.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import msgpack
import xxhash

from agentlog.crypto import PayloadCipher, PayloadKind
from agentlog.errors import CorruptEventError, NotSerializableError, UnknownEventTypeError
from agentlog.eventlog._builders import build_event, build_payload, is_int
from agentlog.eventlog._packing import MAX_DEPTH, PACK_ERRORS, checksum, jsonable, pack, unpack
from agentlog.eventlog._sealing import load_fields, store_fields, stored_payloads
from agentlog.eventlog.events import EVENT_TYPES, SCHEMA_V, Event, EventData

__all__ = [
    "MAX_DEPTH",
    "UPCASTERS",
    "Upcaster",
    "checksum",
    "decode_event",
    "decode_payload",
    "decode_stored_payload",
    "encode_event",
    "encode_payload",
    "encode_stored_payload",
    "encode_stored_payloads",
    "load_fields",
    "jsonable",
    "pack",
    "row_checksum",
    "store_fields",
    "unpack",
]

#: ``(event type, payload at v) -> payload at v + 1``.
Upcaster = Callable[[str, dict[str, Any]], dict[str, Any]]

#: Upcaster from schema version ``v`` to ``v + 1``, keyed by ``v``.
UPCASTERS: dict[int, Upcaster] = {}


def row_checksum(
    run_id: str, seq: int, event_type: str, ts_us: int, schema_v: int, epoch: int, payload: bytes
) -> int:
    """The checksum of an event stored as columns (``ts_us``: microseconds since 1970, UTC).

    It covers every column, so a flipped byte in the seq, the type or the
    payload alike is caught: the envelope columns, NUL-separated, seed the
    hash of the payload. Signed 64-bit, to fit an SQLite INTEGER.
    """
    head = f"{run_id}\0{seq}\0{event_type}\0{ts_us}\0{schema_v}\0{epoch}".encode(
        "utf-8", "surrogatepass"
    )
    value = xxhash.xxh3_64_intdigest(payload, seed=xxhash.xxh3_64_intdigest(head))
    return value - 2**64 if value >= 2**63 else value


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


def encode_stored_payload(event: Event, cipher: PayloadCipher | None) -> bytes:
    """An event's payload as a backend stores it (content sealed with a cipher)."""
    return stored_payloads(cipher, [event])[0]


def encode_stored_payloads(events: Sequence[Event], cipher: PayloadCipher | None) -> list[bytes]:
    """:func:`encode_stored_payload` of each event of one append, sealed batch-wise."""
    return stored_payloads(cipher, events)


def decode_stored_payload(
    event_type: str,
    schema_v: int,
    raw: bytes,
    cipher: PayloadCipher | None,
    *,
    run_id: str,
    seq: int,
    kind: PayloadKind = "event",
    where: str = "",
) -> tuple[EventData, bytes | None, Exception | None]:
    """A payload stored by :func:`encode_stored_payload`: ``(data, sealed, unreadable)``.

    Raises:
        UnknownEventTypeError, CorruptEventError: as :func:`decode_payload`.
    """
    try:
        fields = unpack(raw)
    except ValueError as exc:
        raise CorruptEventError(run_id, seq, f"payload does not decode: {exc}", where) from exc
    if not isinstance(fields, dict):
        raise CorruptEventError(run_id, seq, "payload is not a map", where)
    fields, sealed, unreadable = load_fields(
        cipher, fields, run_id, seq, event_type, kind=kind, where=where
    )
    data = _build_payload(event_type, schema_v, fields, run_id, seq, where, unreadable)
    return data, sealed, unreadable


def _build_payload(
    event_type: str,
    schema_v: int,
    fields: Any,
    run_id: str | None,
    seq: int | None,
    where: str,
    unreadable: Exception | None = None,
) -> EventData:
    """The payload class of ``event_type`` built from its decoded ``fields``.

    Every payload's field types are checked, checksum or not (a bug or
    another tool may store a well-checksummed payload of the wrong shape),
    so that one that fits the class's field names but not its types is a
    CorruptEventError here rather than an AttributeError deep in the fold.
    The check is made as the object is built (:func:`build_payload`, one
    exact type test per field, no call); only a payload it does not accept
    outright is checked again field by field, which decides and names the
    field (issue 23: a call per field cost more than unpacking the bytes).
    """
    cls = EVENT_TYPES.get(event_type)
    if cls is None:
        raise UnknownEventTypeError(run_id, seq, f"unknown event type {event_type!r}", where)
    if not 1 <= schema_v <= SCHEMA_V:
        raise CorruptEventError(
            run_id, seq, f"schema version {schema_v} is not in 1..{SCHEMA_V}", where
        )
    if not isinstance(fields, dict):
        raise CorruptEventError(run_id, seq, "payload is not a map", where)
    if unreadable is not None:  # the metadata only: the content fields are None
        names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
        try:
            return cls(**{name: fields.get(name) for name in names})
        except TypeError as exc:
            raise CorruptEventError(
                run_id, seq, f"payload does not fit {event_type}: {exc}", where
            ) from exc
    for version in range(schema_v, SCHEMA_V):
        fields = UPCASTERS[version](event_type, fields)
    try:
        data, misfit = build_payload(cls, fields)
    except TypeError as exc:
        raise CorruptEventError(
            run_id, seq, f"payload does not fit {event_type}: {exc}", where
        ) from exc
    if misfit:
        raise CorruptEventError(run_id, seq, f"payload does not fit {event_type}: {misfit}", where)
    return data


#: The first byte of a msgpack array of 7 items (a fixarray): the envelope's.
_ENVELOPE_HEAD = b"\x97"

#: One Packer per thread for an envelope's head and its ``[body, checksum]``
#: frame: builtin values only, and ``datetime=True``, so a UTC ``ts`` is packed
#: as the Timestamp extension in C, the same bytes as the codec's ``default``
#: (``msgpack.Timestamp.from_datetime``) gives, without a Python call per event
#: (issue 23 item 10: encoding was most of a Kafka append's CPU). Anything else
#: (another tzinfo, a datetime subclass) takes :func:`pack`.
_FRAMERS = threading.local()
#: Past this, the thread's framer is dropped (a Packer keeps its largest buffer).
_KEEP_BUFFER = 1 << 20


def _framer() -> msgpack.Packer:
    packer: msgpack.Packer | None = getattr(_FRAMERS, "packer", None)
    if packer is None:
        packer = _FRAMERS.packer = msgpack.Packer(use_bin_type=True, datetime=True)
    return packer


def _head(event: Event) -> bytes:
    """The msgpack array of the envelope's first six items (its own array header)."""
    head = [event.run_id, event.seq, event.type, event.ts, event.schema_v, event.writer_epoch]
    ts = event.ts
    if type(ts) is datetime and ts.tzinfo is UTC:
        try:
            raw: bytes = _framer().pack(head)
            return raw
        except PACK_ERRORS:
            pass  # pack() below names what does not fit
    return pack(head, path=f"{event.type}")


def _envelope(event: Event, cipher: PayloadCipher | None) -> bytes:
    if cipher is None and event.sealed is None:
        payload = event.packed
        if payload is None:
            try:
                payload = pack(event.data.to_dict(), path=event.type)
            except NotSerializableError:
                return _envelope_whole(event, cipher)  # the error names the envelope's path
        # The payload's bytes after the 6 items before it, under a 7-item header
        # (a fixarray's first byte is 0x90 | its size).
        return b"".join((_ENVELOPE_HEAD, _head(event)[1:], payload))
    return _envelope_whole(event, cipher)


def _envelope_whole(event: Event, cipher: PayloadCipher | None) -> bytes:
    fields = store_fields(
        cipher, event.data.to_dict(), event.run_id, event.seq, event.type, sealed=event.sealed
    )
    return pack(
        [
            event.run_id,
            event.seq,
            event.type,
            event.ts,
            event.schema_v,
            event.writer_epoch,
            fields,
        ],
        path=f"{event.type}",
    )


def encode_event(event: Event, cipher: PayloadCipher | None = None) -> bytes:
    """The whole envelope and its checksum as msgpack (the Kafka record value).

    The value is ``[envelope, checksum]``: ``envelope`` the msgpack bytes of
    the 7-item array (run id, seq, type, ts, schema_v, writer epoch,
    payload), ``checksum`` their xxHash3-64. With ``cipher``, the payload's
    content is sealed (:func:`store_fields`).
    """
    body = _envelope(event, cipher)
    framer = _framer()
    framed: bytes = framer.pack([body, xxhash.xxh3_64_intdigest(body)])
    if len(framed) > _KEEP_BUFFER:
        _FRAMERS.packer = None
    return framed


def _name_of(items: Any) -> tuple[str | None, int | None]:
    """The run id and seq an envelope claims, when it got that far (for errors)."""
    if not isinstance(items, list) or len(items) < 2:
        return None, None
    run_id, seq = items[0], items[1]
    return (run_id if isinstance(run_id, str) else None), (seq if is_int(seq) else None)


def decode_event(raw: bytes, *, where: str = "", cipher: PayloadCipher | None = None) -> Event:
    """Rebuild an envelope written by :func:`encode_event`, verifying its checksum.

    Sealed content is opened with ``cipher``; content this process cannot
    open comes back as :attr:`Event.unreadable` (see :mod:`agentlog.eventlog._sealing`).

    Raises:
        CorruptEventError: naming the run and seq when the envelope got that
            far, and ``where`` (such as a topic, partition and offset).
    """
    try:
        items = unpack(raw)
    except ValueError as exc:
        raise CorruptEventError(None, None, f"envelope does not decode: {exc}", where) from exc
    if isinstance(items, list) and len(items) == 2:
        body, stored = items
        if not isinstance(body, bytes) or not is_int(stored):
            raise CorruptEventError(None, None, "checksummed frame has the wrong types", where)
        try:
            items = unpack(body)
        except ValueError as exc:
            raise CorruptEventError(None, None, f"envelope does not decode: {exc}", where) from exc
        if checksum(body) != stored:
            run_id, seq = _name_of(items)
            raise CorruptEventError(
                run_id,
                seq,
                f"checksum mismatch (stored {stored:#018x}, computed {checksum(body):#018x}): "
                "the stored bytes changed after they were written",
                where,
            )
    # else: a bare 7-item array, written before checksums existed (unverified).
    if not isinstance(items, list) or len(items) != 7:
        raise CorruptEventError(None, None, "envelope is not a 7-item array", where)
    run_id, seq, event_type, ts, schema_v, epoch, fields = items
    if not (
        isinstance(run_id, str)
        and is_int(seq)
        and isinstance(event_type, str)
        and isinstance(ts, datetime)
        and is_int(schema_v)
        and is_int(epoch)
    ):
        named_run, named_seq = _name_of(items)
        raise CorruptEventError(named_run, named_seq, "envelope fields have the wrong types", where)
    if not isinstance(fields, dict):
        raise CorruptEventError(run_id, seq, "payload is not a map", where)
    fields, sealed, unreadable = load_fields(cipher, fields, run_id, seq, event_type, where=where)
    data = _build_payload(event_type, schema_v, fields, run_id, seq, where, unreadable)
    return build_event(run_id, seq, data, ts.astimezone(UTC), epoch, sealed, unreadable)
