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

The rows' format (columns, times in microseconds, the checksum) is
:mod:`agentlog.eventlog._row_format`, shared with PostgreSQL and Redis.

Migration 5 indexes the run list's order (``runs_by_update``,
``runs_by_status_update``) for :meth:`~agentlog.eventlog._reader.EventReader.page_runs`.
Migration 6 adds ``run_counts``, the listed runs per status, kept by triggers
on ``runs``, so an unfiltered page's counts do not walk every run.
Migration 7 adds ``queue``, ``priority`` and ``admitted_at`` (docs/queues.md).
Migration 8 adds the run mailboxes (:mod:`agentlog.eventlog.sqlite._mailbox`).
Migration 9 indexes ``admitted_at`` for a queue's rate (docs/queues.md).
Migration 10 indexes the queued runs by rank and the queued or running runs
by lease, so an admission reads a few rows whatever the backlog (docs/queues.md).
Migration 11 adds ``run_messages.reported``: whether a send reported the
stored message (:mod:`agentlog.eventlog._mailbox`).
"""

from __future__ import annotations

import functools

from agentlog.eventlog._claim_cases import sql_needs_worker
from agentlog.eventlog._row_format import RUN_COLUMNS, RUN_FIELDS

__all__ = [
    "INSERT_EVENT",
    "MIGRATIONS",
    "NEXT_WAKE",
    "READ_EVENTS",
    "RUNNABLE",
    "SELECT_RUN",
    "UPSERT_RUN",
    "insert_events_sql",
    "update_run_sql",
    "update_written_run_sql",
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
    (
        # How many listed runs (last_seq > 0) each status has, kept by triggers
        # in the same transaction as the run row, so the run list's counts are
        # a few rows to read instead of a walk of every run (one log may hold
        # millions). One writer at a time means the counter rows cost no waits.
        "CREATE TABLE run_counts (status TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID",
        "INSERT INTO run_counts SELECT status, count(*) FROM runs WHERE last_seq > 0 "
        "GROUP BY status",
        "CREATE TRIGGER runs_counted_insert AFTER INSERT ON runs WHEN NEW.last_seq > 0 BEGIN "
        "INSERT INTO run_counts VALUES (NEW.status, 1) "
        "ON CONFLICT (status) DO UPDATE SET n = n + 1; END",
        "CREATE TRIGGER runs_counted_delete AFTER DELETE ON runs WHEN OLD.last_seq > 0 BEGIN "
        "UPDATE run_counts SET n = n - 1 WHERE status = OLD.status; END",
        "CREATE TRIGGER runs_counted_update AFTER UPDATE OF status, last_seq ON runs "
        "WHEN OLD.status IS NOT NEW.status OR (OLD.last_seq > 0) IS NOT (NEW.last_seq > 0) "
        "BEGIN "
        "UPDATE run_counts SET n = n - 1 WHERE OLD.last_seq > 0 AND status = OLD.status; "
        "INSERT INTO run_counts SELECT NEW.status, 1 WHERE NEW.last_seq > 0 "
        "ON CONFLICT (status) DO UPDATE SET n = n + 1; END",
    ),
    (
        # A run's queue, its priority there and when the queue admitted it
        # (docs/queues.md). Its status ``queued`` needs nothing: run_counts
        # counts any status.
        "ALTER TABLE runs ADD COLUMN queue TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE runs ADD COLUMN admitted_at INTEGER",
    ),
    (
        # Run mailboxes (eventlog/_mailbox.py): each message stored for a run's
        # writer, moved once its MessageSent is in the history; and the epoch
        # whose writer closed the run's mailbox before it parks or ends.
        "CREATE TABLE run_messages (id INTEGER PRIMARY KEY AUTOINCREMENT, "
        "run_id TEXT NOT NULL, key TEXT NOT NULL, topic TEXT NOT NULL, value BLOB NOT NULL, "
        "moved INTEGER NOT NULL DEFAULT 0, UNIQUE (run_id, key))",
        "CREATE INDEX run_messages_waiting ON run_messages (run_id, id) WHERE moved = 0",
        "CREATE TABLE run_mailboxes (run_id TEXT PRIMARY KEY, closed_epoch INTEGER NOT NULL) "
        "WITHOUT ROWID",
    ),
    (
        # A queue's rate counts the runs admitted within its period
        # (SqlIndexedEventLog.admitted_since): a range of this index. Partial:
        # a run outside every queue never has an entry, and a run's entry is
        # written once, when it is admitted.
        "CREATE INDEX runs_by_admitted ON runs (admitted_at, workflow) "
        "WHERE admitted_at IS NOT NULL",
    ),
    (
        # A queue's admission (SqlIndexedEventLog.queue_waiting, queue_holders):
        # its best-ranked waiting runs are the first entries of the rank index,
        # and the runs that hold its slots a range of the lease index, so
        # neither reads the backlog. Partial, on the literal statuses the
        # queries name.
        "CREATE INDEX runs_queued_by_rank ON runs (priority, started_at, run_id) "
        "WHERE status = 'queued'",
        "CREATE INDEX runs_held_by_lease ON runs (lease_expires_at) "
        "WHERE status IN ('queued', 'running')",
    ),
    (
        # Whether a send reported a stored message (returned True for it): 0
        # while the send that stored it raised, so the next send of its key
        # reports it (eventlog/_mailbox.py). Rows stored before: reported.
        "ALTER TABLE run_messages ADD COLUMN reported INTEGER NOT NULL DEFAULT 1",
    ),
)

SELECT_RUN = f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?"
# An upsert, not INSERT OR REPLACE: a replace deletes the old row without
# firing the delete trigger that keeps ``run_counts``.
UPSERT_RUN = (
    f"INSERT INTO runs ({RUN_COLUMNS}) VALUES ({', '.join('?' * len(RUN_FIELDS))}) "
    "ON CONFLICT (run_id) DO UPDATE SET "
    + ", ".join(f"{name} = excluded.{name}" for name in RUN_FIELDS if name != "run_id")
)


@functools.lru_cache(maxsize=64)
def update_run_sql(columns: tuple[int, ...]) -> str:
    """``UPDATE runs`` of the run index columns at these positions, then ``WHERE run_id = ?``."""
    assignments = ", ".join(f"{RUN_FIELDS[i]} = ?" for i in columns)
    return f"UPDATE runs SET {assignments} WHERE run_id = ?"


@functools.lru_cache(maxsize=64)
def update_written_run_sql(columns: tuple[int, ...]) -> str:
    """:func:`update_run_sql` that changes the row only if it still has the writer
    epoch and last seq the writer knows of: ``WHERE run_id = ? AND writer_epoch = ?
    AND last_seq = ?``. No row changed means another writer or append came first."""
    return update_run_sql(columns) + " AND writer_epoch = ? AND last_seq = ?"


#: RunInfo.needs_worker (rendered by ``claim_cases``), answered from the indexes.
RUNNABLE = (
    f"SELECT {RUN_COLUMNS} FROM runs WHERE {sql_needs_worker('?1', '?2')} "
    "ORDER BY coalesce(wake_at, updated_at) LIMIT ?3"
)
NEXT_WAKE = "SELECT min(wake_at) FROM runs WHERE status = 'waiting' AND wake_at IS NOT NULL"
_EVENT_COLUMNS = "run_id, seq, type, ts, schema_v, writer_epoch, payload, checksum"
INSERT_EVENT = f"INSERT INTO events ({_EVENT_COLUMNS}) VALUES (?,?,?,?,?,?,?,?)"


@functools.lru_cache(maxsize=64)
def insert_events_sql(rows: int) -> str:
    """:data:`INSERT_EVENT` of ``rows`` rows in one statement, which SQLite
    applies or refuses whole (one row already there undoes the others)."""
    return INSERT_EVENT + ",(?,?,?,?,?,?,?,?)" * (rows - 1)


READ_EVENTS = (
    "SELECT seq, type, ts, schema_v, writer_epoch, payload, checksum FROM events "
    "WHERE run_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?"
)
