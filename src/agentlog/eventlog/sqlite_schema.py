"""The SQLite file's schema, its SQL, and the mapping between rows and values.

Layout of the file (created by the append-only :data:`MIGRATIONS`, whose
count is recorded in ``PRAGMA user_version``):

* ``events``: one row per event. The envelope fields are columns (``ts`` is
  integer microseconds since the Unix epoch, UTC) and ``payload`` holds the
  msgpack bytes of :func:`~agentlog.eventlog.codec.encode_stored_payload`.
  ``UNIQUE(run_id, seq)`` is the last line of defence of the conditional
  append. ``checksum`` (migration 2) is
  :func:`~agentlog.eventlog.codec.row_checksum` of the other columns,
  verified on every read. Rows written before migration 2 have a NULL
  checksum and are read unverified: the migration does not backfill them,
  because a checksum computed now over bytes that may already have rotted
  would vouch for the rot.
* ``runs``: the run index and the writer claim (epoch and lease), updated in
  the same transaction as the events, so the two never disagree. A pruned
  run keeps its row with ``archived = 1`` (a tombstone), so its id stays taken.
  ``wake_at`` (migration 3) is the due time of a waiting run's earliest timer.
* ``snapshots``: the newest ``keep_snapshots`` snapshots of each run and the
  older ones they build on (their bytes carry the projector's own checksum).
  ``base_seq`` (migration 4) is the seq of the snapshot a delta snapshot
  builds on, 0 for one that stands alone.

Migration 5 indexes the run list's order (``runs_by_update``,
``runs_by_status_update``) for :meth:`~agentlog.eventlog.base.EventReader.page_runs`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from agentlog.crypto import PayloadCipher
from agentlog.errors import CorruptEventError, NotSerializableError
from agentlog.eventlog.base import RunInfo
from agentlog.eventlog.codec import decode_stored_payload, encode_stored_payloads, row_checksum
from agentlog.eventlog.events import LANGGRAPH_WORKFLOW, Event

__all__ = [
    "INSERT_EVENT",
    "MAX_SEQ",
    "MIGRATIONS",
    "NEXT_WAKE",
    "READ_EVENTS",
    "RUNNABLE",
    "RUN_COLUMNS",
    "SELECT_RUN",
    "UPSERT_RUN",
    "event_from_row",
    "event_row",
    "event_rows",
    "from_us",
    "info_from_row",
    "info_to_row",
    "seq_param",
    "to_us",
    "update_run_sql",
]

#: Schema migrations, applied in order; append only, never edit a shipped one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        "CREATE TABLE events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, "
        "ts INTEGER NOT NULL, schema_v INTEGER NOT NULL, writer_epoch INTEGER NOT NULL, "
        "payload BLOB NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID",
        "CREATE TABLE runs (run_id TEXT PRIMARY KEY, workflow TEXT NOT NULL, "
        "version TEXT NOT NULL, status TEXT NOT NULL, last_seq INTEGER NOT NULL, "
        "steps INTEGER NOT NULL, started_at INTEGER, updated_at INTEGER, "
        "writer_epoch INTEGER NOT NULL, lease_owner TEXT NOT NULL, lease_expires_at INTEGER) "
        "WITHOUT ROWID",
        "CREATE TABLE snapshots (run_id TEXT NOT NULL, seq INTEGER NOT NULL, "
        "state BLOB NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (run_id, seq))",
    ),
    (
        "ALTER TABLE events ADD COLUMN checksum INTEGER",
        "ALTER TABLE runs ADD COLUMN archived INTEGER NOT NULL DEFAULT 0",
    ),
    (
        "ALTER TABLE runs ADD COLUMN wake_at INTEGER",
        "CREATE INDEX runs_by_wake ON runs (wake_at) WHERE wake_at IS NOT NULL",
        "CREATE INDEX runs_by_status ON runs (status)",
    ),
    ("ALTER TABLE snapshots ADD COLUMN base_seq INTEGER NOT NULL DEFAULT 0",),
    (
        # The run list's order (EventReader.page_runs), whole and per status, so
        # that a page is an index walk, never a sort of every run. They cover the
        # filtered columns too: skipping 90,000 runs or counting them reads the
        # index alone.
        "CREATE INDEX runs_by_update ON runs (updated_at DESC, run_id, last_seq, status, workflow)",
        "CREATE INDEX runs_by_status_update ON runs "
        "(status, updated_at DESC, run_id, last_seq, workflow)",
    ),
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
MAX_SEQ = 2**63 - 1

# The run index columns are RunInfo's fields, by name.
_RUN_FIELDS = tuple(f.name for f in dataclasses.fields(RunInfo))
RUN_COLUMNS = ", ".join(_RUN_FIELDS)
_TIME_FIELDS = frozenset(
    {"started_at", "updated_at", "lease_expires_at", "wake_at"}
)  # microseconds
SELECT_RUN = f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?"
UPSERT_RUN = (
    f"INSERT OR REPLACE INTO runs ({RUN_COLUMNS}) VALUES ({', '.join('?' * len(_RUN_FIELDS))})"
)


@functools.lru_cache(maxsize=64)
def update_run_sql(columns: tuple[int, ...]) -> str:
    """``UPDATE runs`` of the run index columns at these positions, then ``WHERE run_id = ?``."""
    assignments = ", ".join(f"{_RUN_FIELDS[i]} = ?" for i in columns)
    return f"UPDATE runs SET {assignments} WHERE run_id = ?"


# The same rule as RunInfo.needs_worker, answered from the indexes.
RUNNABLE = (
    f"SELECT {RUN_COLUMNS} FROM runs WHERE last_seq > 0 AND workflow <> '{LANGGRAPH_WORKFLOW}' "
    "AND (lease_expires_at IS NULL OR lease_expires_at <= ?1) "
    "AND (status = 'running' OR (status = 'waiting' AND wake_at <= ?2)) "
    "ORDER BY coalesce(wake_at, updated_at) LIMIT ?3"
)
NEXT_WAKE = "SELECT min(wake_at) FROM runs WHERE status = 'waiting' AND wake_at IS NOT NULL"
_EVENT_COLUMNS = "run_id, seq, type, ts, schema_v, writer_epoch, payload, checksum"
INSERT_EVENT = f"INSERT INTO events ({_EVENT_COLUMNS}) VALUES (?,?,?,?,?,?,?,?)"
READ_EVENTS = (
    "SELECT seq, type, ts, schema_v, writer_epoch, payload, checksum FROM events "
    "WHERE run_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?"
)


def seq_param(seq: int) -> int:
    """A seq bound as SQLite can take it: no stored seq is below 0 or above 2**63 - 1."""
    return max(0, min(seq, MAX_SEQ))


def to_us(moment: datetime, what: str = "ts") -> int:
    """Integer microseconds since the Unix epoch, as the time columns hold them.

    Raises:
        NotSerializableError: ``moment`` is naive (no time zone).
    """
    if moment.tzinfo is None:
        raise NotSerializableError(what, "naive datetime")
    return (moment - _EPOCH) // _MICROSECOND


def from_us(us: int) -> datetime:
    """The UTC datetime of a time column's microseconds."""
    return _EPOCH + timedelta(microseconds=us)


def info_from_row(row: Sequence[Any]) -> RunInfo:
    """A run index row (selected as :data:`RUN_COLUMNS`) as a RunInfo."""
    values = dict(zip(_RUN_FIELDS, row, strict=True))
    for name in _TIME_FIELDS:
        values[name] = None if values[name] is None else from_us(values[name])
    values["archived"] = bool(values["archived"])
    return RunInfo(**values)


def info_to_row(info: RunInfo) -> list[Any]:
    """A RunInfo as the parameters of :data:`UPSERT_RUN`."""
    values = [getattr(info, name) for name in _RUN_FIELDS]
    for i, name in enumerate(_RUN_FIELDS):
        if name in _TIME_FIELDS and values[i] is not None:
            values[i] = to_us(values[i])
    return values


def event_row(event: Event, epoch: int, cipher: PayloadCipher | None) -> tuple[Any, ...]:
    """An event as the parameters of :data:`INSERT_EVENT`, checksum last (content
    sealed with ``cipher``, see :mod:`agentlog.eventlog.sealing`).

    Raises:
        NotSerializableError: the payload cannot be encoded, or ``ts`` is naive.
    """
    return event_rows([event], epoch, cipher)[0]


def event_rows(
    events: Sequence[Event], epoch: int, cipher: PayloadCipher | None
) -> list[tuple[Any, ...]]:
    """:func:`event_row` of each event of one append (sealed batch-wise:
    :func:`~agentlog.eventlog.codec.encode_stored_payloads`).

    Raises:
        NotSerializableError: a payload cannot be encoded, or a ``ts`` is naive.
    """
    for event in events:
        if event.ts.tzinfo is None:
            raise NotSerializableError(f"{event.type} seq {event.seq} ts", "naive datetime")
    rows = []
    for event, payload in zip(events, encode_stored_payloads(events, cipher), strict=True):
        us = (event.ts - _EPOCH) // _MICROSECOND
        row = (event.run_id, event.seq, event.type, us, event.schema_v, epoch, payload)
        rows.append((*row, row_checksum(*row)))
    return rows


def event_from_row(
    run_id: str, row: Sequence[Any], where: str, cipher: PayloadCipher | None
) -> Event:
    """Verify a stored row's checksum and decode it (a row of :data:`READ_EVENTS`).

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
        return Event(run_id, seq, data, from_us(ts), epoch, sealed=sealed, unreadable=unreadable)
    except (TypeError, ValueError, OverflowError, NotSerializableError) as exc:
        # Columns of the wrong type: written by something else than agentlog.
        raise CorruptEventError(run_id, seq, f"bad envelope column: {exc}", where) from exc
