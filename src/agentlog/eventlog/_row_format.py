"""The row format every indexed backend stores: run index rows and event rows.

SQLite and PostgreSQL store these rows as table columns, Redis as a hash and
stream entry fields (:mod:`agentlog.eventlog.redis._rows` maps them), so one
format, written here once, serves all three:

* a run index row is :class:`~agentlog.eventlog._records.RunInfo`'s fields by
  name (:data:`RUN_FIELDS`), its times as integer microseconds since the
  Unix epoch, UTC (:data:`TIME_FIELDS`);
* an event row is ``run_id, seq, type, ts, schema_v, writer_epoch, payload,
  checksum``: ``ts`` in microseconds, ``payload`` the msgpack bytes of
  :func:`~agentlog.eventlog.codec.encode_stored_payloads` (content sealed
  when a cipher is set) and ``checksum`` the
  :func:`~agentlog.eventlog.codec.row_checksum` of the other columns,
  verified on every read. A row with no checksum (written by a SQLite file
  before its migration 2) is read unverified.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from xxhash import xxh3_64_intdigest

from agentlog.crypto import PayloadCipher
from agentlog.errors import CorruptEventError, NotSerializableError
from agentlog.eventlog._builders import build_event
from agentlog.eventlog._records import RunInfo
from agentlog.eventlog.codec import decode_stored_payload, encode_stored_payloads, row_checksum
from agentlog.eventlog.events import Event, RunStatus, steps_after

__all__ = [
    "MAX_SEQ",
    "RUN_COLUMNS",
    "RUN_FIELDS",
    "TIME_FIELDS",
    "epoch_us",
    "event_from_row",
    "event_row",
    "event_rows",
    "from_us",
    "info_from_row",
    "info_to_row",
    "row_after_steps",
    "seq_param",
    "to_us",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
#: The highest seq a store can hold (a signed 64-bit integer).
MAX_SEQ = 2**63 - 1

#: The run index columns: RunInfo's fields, by name, in order.
RUN_FIELDS = tuple(f.name for f in dataclasses.fields(RunInfo))
RUN_COLUMNS = ", ".join(RUN_FIELDS)
#: The run index fields stored as microseconds.
TIME_FIELDS = frozenset({"started_at", "updated_at", "lease_expires_at", "wake_at", "admitted_at"})


def seq_param(seq: int) -> int:
    """A seq bound as a store can take it: no stored seq is below 0 or above 2**63 - 1."""
    return max(0, min(seq, MAX_SEQ))


def epoch_us(moment: datetime) -> int:
    """Integer microseconds since the Unix epoch of an aware ``moment``: the one
    conversion of every time a store orders or keeps (a naive ``moment`` raises
    TypeError; callers that take one from a user check it first, each with its
    own error, as :func:`to_us` does)."""
    return (moment - _EPOCH) // _MICROSECOND


def to_us(moment: datetime, what: str = "ts") -> int:
    """Integer microseconds since the Unix epoch, as the time columns hold them.

    Raises:
        NotSerializableError: ``moment`` is naive (no time zone).
    """
    if moment.tzinfo is None:
        raise NotSerializableError(what, "naive datetime")
    return epoch_us(moment)


def from_us(us: int) -> datetime:
    """The UTC datetime of a time column's microseconds."""
    return _EPOCH + timedelta(0, 0, us)  # positional: a keyword costs a third more


#: Positions in a run index row of the time fields, and of ``archived``.
_TIME_AT = tuple(i for i, name in enumerate(RUN_FIELDS) if name in TIME_FIELDS)
_ARCHIVED = RUN_FIELDS.index("archived")


def info_from_row(row: Sequence[Any]) -> RunInfo:
    """A run index row (selected as :data:`RUN_COLUMNS`) as a RunInfo.

    Raises:
        ValueError: the row has not one value per run index column.
    """
    values = list(row)
    if len(values) != len(RUN_FIELDS):
        raise ValueError(f"a run index row has {len(RUN_FIELDS)} columns, not {len(values)}")
    for i in _TIME_AT:
        if values[i] is not None:
            values[i] = from_us(values[i])
    values[_ARCHIVED] = bool(values[_ARCHIVED])
    return RunInfo(*values)  # positional, in field order: keywords cost more


def info_to_row(info: RunInfo) -> list[Any]:
    """A RunInfo as a run index row, in :data:`RUN_FIELDS` order."""
    values = [getattr(info, name) for name in RUN_FIELDS]
    for i, name in enumerate(RUN_FIELDS):
        if name in TIME_FIELDS and values[i] is not None:
            values[i] = to_us(values[i])
    return values


#: Events that change nothing in a run's index row but its last seq, update time
#: and step count, unless the run is ``queued`` (a driven event makes it
#: ``running``) or has a wake-up time that the row's rules would drop: a
#: step's events. :func:`row_after_steps` writes them without the full rules;
#: ``tests/property/test_run_row_delta_laws.py`` holds it to them.
STEP_EVENTS = frozenset(
    {
        "StepCompleted",
        "StepFailed",
        "SuperstepCommitted",
        "TaskStarted",
        "TaskCompleted",
        "TaskFailed",
        "ProgressReported",
        "ValuePublished",
    }
)
_STATUS, _LAST_SEQ, _STEPS, _UPDATED_AT, _WAKE_AT = (
    RUN_FIELDS.index(name) for name in ("status", "last_seq", "steps", "updated_at", "wake_at")
)


def row_after_steps(
    row: Sequence[Any], events: Sequence[Event], updated_us: int
) -> list[Any] | None:
    """``info_to_row(info_from_row(row).after(events))``, made as a copy of ``row``
    with three columns set, when ``events`` are all :data:`STEP_EVENTS`: the
    run index row after most appends (a step's), without a RunInfo built,
    replaced and turned back into a row (issue 23 items 6 and 7). None for
    any other batch or row: the caller takes the full rules.

    Args:
        row: the run's index row before ``events`` (:func:`info_to_row`'s form).
        events: the run's next batch.
        updated_us: the last event's time in microseconds (its stored ``ts``).
    """
    status = row[_STATUS]
    if status == RunStatus.QUEUED or (row[_WAKE_AT] is not None and status != RunStatus.WAITING):
        return None
    steps = row[_STEPS]
    step_events = STEP_EVENTS
    for event in events:
        event_type = event.data.type
        if event_type not in step_events:
            return None
        steps = steps_after(steps, event_type)
    new = list(row)
    new[_LAST_SEQ] = events[-1].seq
    new[_UPDATED_AT] = updated_us
    new[_STEPS] = steps
    return new


def event_row(event: Event, epoch: int, cipher: PayloadCipher | None) -> tuple[Any, ...]:
    """An event as a stored row, checksum last (content sealed with ``cipher``,
    see :mod:`agentlog.eventlog._sealing`).

    Raises:
        NotSerializableError: the payload cannot be encoded, or ``ts`` is naive.
    """
    return event_rows([event], epoch, cipher)[0]


def event_rows(
    events: Sequence[Event], epoch: int, cipher: PayloadCipher | None
) -> list[tuple[Any, ...]]:
    """:func:`event_row` of each event of one append (sealed batch-wise:
    :func:`~agentlog.eventlog.codec.encode_stored_payloads`), each row and its
    checksum made in one pass.

    Raises:
        NotSerializableError: a payload cannot be encoded, or a ``ts`` is naive.
    """
    try:
        stamps = [(event.ts - _EPOCH) // _MICROSECOND for event in events]  # epoch_us
    except TypeError:
        for event in events:
            if event.ts.tzinfo is None:
                raise NotSerializableError(
                    f"{event.type} seq {event.seq} ts", "naive datetime"
                ) from None
        raise
    payloads = encode_stored_payloads(events, cipher)
    rows: list[tuple[Any, ...]] = []
    add = rows.append
    digest, head_of, names = xxh3_64_intdigest, _CHECKSUM_HEAD, _TYPE_BYTES
    run_id, run = None, b""
    schema_v: Any = _UNSET  # no version seen yet (None is a version a bad event may carry)
    tail: bytes | None = b""
    for event, us, payload in zip(events, stamps, payloads, strict=True):
        if event.run_id is not run_id:
            run_id = event.run_id
            run = run_id.encode("utf-8", "surrogatepass") + b"\0"
        seq, event_type = event.seq, event.data.type
        name = names.get(event_type) or _type_bytes(event_type)
        if event.schema_v is not schema_v:  # the head's last two columns, once a batch
            schema_v = event.schema_v
            try:
                tail = _CHECKSUM_TAIL % (schema_v, epoch)
            except TypeError:  # not ints: the head below fails, and row_checksum says them
                tail = None
        try:  # row_checksum, inlined: its head built from the bytes of its parts
            value = digest(payload, seed=digest(head_of % (run, seq, name, us, tail)))
        except TypeError:  # a column that is not an int: row_checksum says it as it is
            checksum = row_checksum(run_id, seq, event_type, us, schema_v, epoch, payload)
        else:
            checksum = value - _TWO_64 if value >= _TWO_63 else value
        add((run_id, seq, event_type, us, schema_v, epoch, payload, checksum))
    return rows


_UNSET = object()

#: :func:`~agentlog.eventlog.codec.row_checksum`'s head (its columns, NUL-separated:
#: ``run_id\0seq\0type\0ts\0schema_v\0epoch``) from bytes made once: the run id
#: and its NUL, the type name between NULs, and the last two columns (the same
#: for a whole batch). The same bytes as the f-string for int columns.
_CHECKSUM_HEAD = b"%b%d%b%d%b"
_CHECKSUM_TAIL = b"\0%d\0%d"
_TWO_63, _TWO_64 = 2**63, 2**64
_TYPE_BYTES: dict[str, bytes] = {}


def _type_bytes(event_type: str) -> bytes:
    name = _TYPE_BYTES[event_type] = b"\0%b\0" % event_type.encode("utf-8", "surrogatepass")
    return name


def event_from_row(
    run_id: str, row: Sequence[Any], where: str, cipher: PayloadCipher | None
) -> Event:
    """Verify a stored row's checksum and decode it (the row without its run id:
    ``seq, type, ts, schema_v, writer_epoch, payload, checksum``).

    Raises:
        CorruptEventError: naming the run and seq.
    """
    seq, event_type, ts, schema_v, epoch, payload, stored = row
    try:
        if stored is not None:
            computed = row_checksum(run_id, seq, event_type, ts, schema_v, epoch, payload)
            if computed != stored:
                raise CorruptEventError(
                    run_id,
                    seq,
                    f"checksum mismatch (stored {stored}, computed {computed}): the row changed "
                    "after it was written",
                    where,
                )
        data, sealed, unreadable = decode_stored_payload(
            event_type, schema_v, payload, cipher, run_id=run_id, seq=seq, where=where
        )
        return build_event(run_id, seq, data, from_us(ts), epoch, sealed, unreadable)
    except (TypeError, ValueError, OverflowError, NotSerializableError) as exc:
        # Columns of the wrong type: written by something else than agentlog.
        raise CorruptEventError(run_id, seq, f"bad envelope column: {exc}", where) from exc
