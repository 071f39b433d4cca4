"""Decoding a batch of stored event rows with few Python steps per event.

The read path decodes a run's rows a batch at a time (``read_batch``, 1,000
by default). Decoded one by one (:func:`~agentlog.eventlog._row_format.event_from_row`),
each event costs four nested calls, an msgpack call with its options parsed
again, and the checks spread over them (issue 23 item 8: a full fold of 1M
events spent more on those steps than on the work). :func:`decode_rows` does
the same work for the whole batch in one loop: one msgpack Unpacker over the
batch's payloads laid end to end, the checksum and the envelope inline.

It is only a shortcut, never a second set of rules: it takes the common
case (a clear payload at the current schema version, a checksum, columns of
exactly the types agentlog writes, every field of the payload fitting its
class at a glance) and stops at the first row that is anything else. The
caller decodes that row and the rest one by one, as before, so whatever
makes a row corrupt is found and named by the same code as always
(CorruptEventError, UnknownEventTypeError, TamperedPayloadError).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import msgpack
import xxhash

from agentlog.crypto import PayloadCipher
from agentlog.eventlog._builders import build_event, build_payload
from agentlog.eventlog._packing import _ext_hook
from agentlog.eventlog._sealing import SEALED_KEY
from agentlog.eventlog.events import EVENT_TYPES, SCHEMA_V, Event

__all__ = ["batch_unpacker", "decode_rows"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_HASH = xxhash.xxh3_64_intdigest
_SIGNED = 2**63
_WRAP = 2**64


def batch_unpacker(rows: Sequence[Any]) -> msgpack.Unpacker | None:
    """One Unpacker over the payloads (column 5) of ``rows`` laid end to end,
    unpacking as the codec unpacks one; None for a batch whose payloads are
    not all bytes (the caller's slow path names the row)."""
    try:
        unpacker = msgpack.Unpacker(
            raw=False,
            ext_hook=_ext_hook,
            timestamp=3,
            strict_map_key=False,
            max_buffer_size=2**31 - 1,
        )
        unpacker.feed(b"".join([row[5] for row in rows]))
    except (TypeError, ValueError):
        return None
    return unpacker


def decode_rows(
    run_id: str,
    rows: Sequence[Any],
    first_seq: int,
    cipher: PayloadCipher | None,
    checked: bool = False,
) -> list[Event]:
    """The events of the longest run of ``rows`` (``seq, type, ts, schema_v,
    writer_epoch, payload, checksum``, from seq ``first_seq`` on, one more each)
    that decode on the fast path (see the module docstring). ``checked``: the
    rows' checksums were verified already (a cold read's,
    :func:`~agentlog.eventlog._indexed._verified`), so they are not hashed again.

    Never raises for a bad row: it stops before it, for the caller to decode
    one by one. A log that seals content (``cipher``) takes the slow path.
    """
    if cipher is not None or not rows:
        return []
    events: list[Event] = []
    unpacker = batch_unpacker(rows)
    if unpacker is None:  # a column of another type: the slow path names it
        return events
    expected, offset = first_seq, 0
    types, append = EVENT_TYPES.get, events.append
    try:
        for seq, event_type, ts, schema_v, epoch, payload, stored in rows:
            if (
                seq != expected
                or schema_v != SCHEMA_V
                or type(seq) is not int
                or type(ts) is not int
                or type(epoch) is not int
                or type(event_type) is not str
                or type(payload) is not bytes
                or type(stored) is not int
            ):
                break
            if not checked:
                head = f"{run_id}\0{seq}\0{event_type}\0{ts}\0{schema_v}\0{epoch}"
                computed = _HASH(payload, seed=_HASH(head.encode("utf-8", "surrogatepass")))
                if (computed - _WRAP if computed >= _SIGNED else computed) != stored:
                    break
            fields = unpacker.unpack()
            offset += len(payload)
            cls = types(event_type)
            if unpacker.tell() != offset or type(fields) is not dict or cls is None:
                break
            if SEALED_KEY in fields:
                break
            data, misfit = build_payload(cls, fields)
            if misfit:
                break
            append(build_event(run_id, seq, data, _EPOCH + timedelta(0, 0, ts), epoch, None, None))
            expected += 1
    except Exception:  # the row that raised is decoded again, slowly
        pass
    return events
