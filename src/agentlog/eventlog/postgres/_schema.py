"""The PostgreSQL backend's tables, its SQL, and its append-only migrations.

Layout (every name prefixed ``agentlog_``, so the tables can share a
database, and its ``public`` schema, with the application's own):

* ``agentlog_events``: one row per event, primary key ``(run_id, seq)``, the
  last line of defence of the conditional append. The columns are those of
  the SQLite file, so that the rows and their ``checksum``
  (:func:`~agentlog.eventlog.codec.row_checksum`) are built and verified by
  the same functions: ``ts`` is integer microseconds since 1970 UTC, and
  ``payload`` the bytes of :func:`~agentlog.eventlog.codec.encode_stored_payload`
  (sealed when the log has a cipher).
* ``agentlog_runs``: the run index (the fields of
  :class:`~agentlog.eventlog._base.RunInfo`, times in microseconds) and the
  writer claim. Its row is the lock of the run: an append updates it in the
  same statement that inserts the events, and only while its ``last_seq``
  and ``writer_epoch`` are the ones the append expects.
* ``agentlog_snapshots``: the newest ``keep_snapshots`` of each run and the
  older ones they build on (``base_seq``).
* ``agentlog_schema_version``: one row, the number of :data:`MIGRATIONS`
  applied. A newer number than this agentlog knows refuses to open.

Each insert into ``agentlog_events`` sends a ``NOTIFY`` on
:data:`CHANNEL` with the run ids it touched (a statement trigger), so
:meth:`~agentlog.eventlog.postgres._log.PostgresEventLog.tail` wakes on any
writer's commit, in any process.
"""

from __future__ import annotations

import dataclasses

from agentlog.eventlog._base import RunInfo
from agentlog.eventlog._claim_cases import (
    CLAIM_CASES,
    LEASE_CASES,
    grant,
    sql_append_grant,
    sql_grant,
    sql_needs_worker,
)

__all__ = [
    "APPEND_FAST",
    "APPEND_NEW",
    "APPEND_ONE",
    "CHANNEL",
    "CLAIM",
    "COPY_EVENTS",
    "COPY_FROM",
    "COPY_TYPES",
    "INSERT_EVENTS",
    "LEASE",
    "LOCK_RUN",
    "MIGRATIONS",
    "NEXT_WAKE",
    "READ_EVENTS",
    "RUNNABLE",
    "RUN_COLUMNS",
    "RUN_FIELDS",
    "SELECT_RUN",
    "UPDATE_RUN_IF",
    "UPSERT_RUN",
]

#: The LISTEN/NOTIFY channel of appends; the payload is a run id.
CHANNEL = "agentlog_events"

#: Schema migrations, applied in order; append only, never edit a shipped one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        "CREATE TABLE agentlog_events (run_id text NOT NULL, seq bigint NOT NULL, "
        "type text NOT NULL, ts bigint NOT NULL, schema_v integer NOT NULL, "
        "writer_epoch bigint NOT NULL, payload bytea NOT NULL, checksum bigint, "
        "PRIMARY KEY (run_id, seq))",
        "CREATE TABLE agentlog_runs (run_id text PRIMARY KEY, workflow text NOT NULL, "
        "version text NOT NULL, status text NOT NULL, last_seq bigint NOT NULL, "
        "steps bigint NOT NULL, started_at bigint, updated_at bigint, "
        "writer_epoch bigint NOT NULL, lease_owner text NOT NULL, lease_expires_at bigint, "
        "wake_at bigint, archived boolean NOT NULL DEFAULT false)",
        "CREATE INDEX agentlog_runs_by_wake ON agentlog_runs (wake_at) WHERE wake_at IS NOT NULL",
        "CREATE INDEX agentlog_runs_by_status ON agentlog_runs (status)",
        "CREATE TABLE agentlog_snapshots (run_id text NOT NULL, seq bigint NOT NULL, "
        "state bytea NOT NULL, created_at bigint NOT NULL, base_seq bigint NOT NULL DEFAULT 0, "
        "PRIMARY KEY (run_id, seq))",
        "CREATE FUNCTION agentlog_notify_events() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN PERFORM pg_notify('" + CHANNEL + "', r.run_id) "
        "FROM (SELECT DISTINCT run_id FROM new_rows) r; RETURN NULL; END $$",
        "CREATE TRIGGER agentlog_events_notify AFTER INSERT ON agentlog_events "
        "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT "
        "EXECUTE FUNCTION agentlog_notify_events()",
    ),
    (
        # The run list's order (EventReader.page_runs), whole and per status; run
        # ids compare by code point ("C"), as Python and SQLite compare them.
        "CREATE INDEX agentlog_runs_by_update ON agentlog_runs "
        '(updated_at DESC, run_id COLLATE "C") INCLUDE (last_seq, status, workflow)',
        "CREATE INDEX agentlog_runs_by_status_update ON agentlog_runs "
        '(status, updated_at DESC, run_id COLLATE "C") INCLUDE (last_seq, workflow)',
    ),
    (
        # A run's queue, its priority there and when the queue admitted it
        # (docs/queues.md): a queue's admissions count them.
        "ALTER TABLE agentlog_runs ADD COLUMN queue text NOT NULL DEFAULT '', "
        "ADD COLUMN priority bigint NOT NULL DEFAULT 0, ADD COLUMN admitted_at bigint",
    ),
    (
        # Run mailboxes (eventlog/_mailbox.py): each message stored for a run's
        # writer, moved once its MessageSent is in the history; and the epoch
        # whose writer closed the run's mailbox before it parks or ends.
        "CREATE TABLE agentlog_run_messages (id bigserial PRIMARY KEY, run_id text NOT NULL, "
        "key text NOT NULL, topic text NOT NULL, value bytea NOT NULL, "
        "moved boolean NOT NULL DEFAULT false, UNIQUE (run_id, key))",
        "CREATE INDEX agentlog_run_messages_waiting ON agentlog_run_messages (run_id, id) "
        "WHERE NOT moved",
        "CREATE TABLE agentlog_run_mailboxes (run_id text PRIMARY KEY, "
        "closed_epoch bigint NOT NULL)",
    ),
    (
        # A queue's rate counts the runs admitted within its period: a range
        # of this index (partial: only runs a queue admitted have an entry).
        "CREATE INDEX agentlog_runs_by_admitted ON agentlog_runs (admitted_at, workflow) "
        "WHERE admitted_at IS NOT NULL",
    ),
    (
        # A queue's admission reads its best-ranked waiting runs and the runs
        # holding its slots from these, not the backlog (docs/queues.md).
        "CREATE INDEX agentlog_runs_queued_by_rank ON agentlog_runs "
        "(priority, started_at, run_id) WHERE status = 'queued'",
        "CREATE INDEX agentlog_runs_held_by_lease ON agentlog_runs (lease_expires_at) "
        "WHERE status IN ('queued', 'running')",
    ),
    (
        # Whether a send reported a stored message (returned True for it):
        # false while the send that stored it raised, so the next send of its
        # key reports it (eventlog/_mailbox.py). Rows stored before: reported.
        "ALTER TABLE agentlog_run_messages ADD COLUMN reported boolean NOT NULL DEFAULT true",
    ),
)

# The run index columns are RunInfo's fields, by name (as in the SQLite file).
RUN_FIELDS = tuple(f.name for f in dataclasses.fields(RunInfo))
RUN_COLUMNS = ", ".join(RUN_FIELDS)
SELECT_RUN = f"SELECT {RUN_COLUMNS} FROM agentlog_runs WHERE run_id = %s"
#: The run's row, locked until the transaction ends (the fence of claims and appends).
LOCK_RUN = SELECT_RUN + " FOR UPDATE"
UPSERT_RUN = (
    f"INSERT INTO agentlog_runs ({RUN_COLUMNS}) VALUES ({', '.join(['%s'] * len(RUN_FIELDS))}) "
    "ON CONFLICT (run_id) DO UPDATE SET "
    + ", ".join(f"{name} = EXCLUDED.{name}" for name in RUN_FIELDS[1:])
)

#: A writer claim in one statement: a new row at epoch 1, or the next epoch of
#: the row, unless a refusing case of the claim table applies (a polite claim
#: of a live lease: then no row comes back). The condition and the epoch step
#: are generated from :data:`~agentlog.eventlog._claim_cases.CLAIM_CASES`. The
#: upsert waits for the row's lock, so it is ordered with the appends of the
#: writer it fences.
CLAIM = (
    f"INSERT INTO agentlog_runs ({RUN_COLUMNS}) "
    f"VALUES ({', '.join(f'%({name})s' for name in RUN_FIELDS)}) "
    "ON CONFLICT (run_id) DO UPDATE SET writer_epoch = agentlog_runs.writer_epoch + "
    f"{grant(CLAIM_CASES).epoch_step}, "
    "lease_owner = EXCLUDED.lease_owner, lease_expires_at = EXCLUDED.lease_expires_at "
    f"WHERE {sql_grant(CLAIM_CASES)} "
    f"RETURNING {RUN_COLUMNS}"
)
#: A renewal (``%(expires)s``) or release (NULL) of the lease of the writer of
#: ``%(epoch)s``, by the lease table
#: (:data:`~agentlog.eventlog._claim_cases.LEASE_CASES`): no row is updated for
#: a refused call, and the caller reads the row to raise the case's error.
LEASE = (
    "UPDATE agentlog_runs SET lease_expires_at = %(expires)s "
    f"WHERE run_id = %(run)s AND ({sql_grant(LEASE_CASES)})"
)

_EVENT_COLUMNS = "run_id, seq, type, ts, schema_v, writer_epoch, payload, checksum"
# One statement for any batch size: the rows go as eight arrays.
_UNNEST = (
    "unnest(%(run_id)b::text[], %(seq)b::bigint[], %(type)b::text[], %(ts)b::bigint[], "
    "%(schema_v)b::int[], %(writer_epoch)b::bigint[], %(payload)b::bytea[], "
    "%(checksum)b::bigint[])"
)
INSERT_EVENTS = f"INSERT INTO agentlog_events ({_EVENT_COLUMNS}) SELECT * FROM {_UNNEST}"

#: The conditional append in ONE statement (one round trip, its own
#: transaction in autocommit): the run's row is updated only if its last seq
#: and writer epoch are the ones the batch expects, and the events are
#: inserted only if that update happened. The update takes the row's lock,
#: so a concurrent claim either waits for this commit or fences it first.
#: Zero rows returned: nothing was written; the slow path says why. The
#: condition is generated from :data:`~agentlog.eventlog._claim_cases.APPEND_CHECKS`
#: (``%(epoch)s``: the batch's epoch; ``%(expect_seq)s``: the seq before its first).
_UPDATE_RUN_IF = (
    "UPDATE agentlog_runs SET workflow = %(workflow)s, version = %(version)s, "
    "status = %(status)s, last_seq = %(last_seq)s, steps = %(steps)s, "
    "started_at = %(started_at)s, updated_at = %(updated_at)s, wake_at = %(wake_at)s, "
    "queue = %(queue)s, priority = %(priority)s, admitted_at = %(admitted_at)s "
    f"WHERE run_id = %(run)s AND {sql_append_grant()}"
)
APPEND_FAST = (
    f"WITH run AS ({_UPDATE_RUN_IF} RETURNING 1) "
    f"INSERT INTO agentlog_events ({_EVENT_COLUMNS}) SELECT e.* FROM {_UNNEST} AS e, run"
)
#: :data:`APPEND_FAST` for one event, its values as scalars: psycopg dumps
#: eight one-element arrays in Python, which cost more than the statement's
#: server time (the common case: a sync append of one step's event).
APPEND_ONE = (
    f"WITH run AS ({_UPDATE_RUN_IF} RETURNING 1) "
    f"INSERT INTO agentlog_events ({_EVENT_COLUMNS}) SELECT %(run_id)s::text, "
    "%(seq)s::bigint, %(type)s::text, %(ts)s::bigint, %(schema_v)s::int, "
    "%(writer_epoch)s::bigint, %(payload)b::bytea, %(checksum)s::bigint FROM run"
)
#: The first batch of a run that has no row yet, in ONE statement: the row is
#: inserted (its fields as ``r_<name>``) unless one exists, and the events only
#: if it was. A row that exists, or a concurrent claim or append that made
#: one first, leaves nothing written; the slow path then says why.
APPEND_NEW = (
    f"WITH run AS (INSERT INTO agentlog_runs ({RUN_COLUMNS}) "
    f"VALUES ({', '.join(f'%(r_{name})s' for name in RUN_FIELDS)}) "
    "ON CONFLICT (run_id) DO NOTHING RETURNING 1) "
    f"INSERT INTO agentlog_events ({_EVENT_COLUMNS}) SELECT e.* FROM {_UNNEST} AS e, run"
)
#: The conditional update alone (big batches: the rows follow by COPY, same transaction).
UPDATE_RUN_IF = _UPDATE_RUN_IF
#: Batches of at least this many events go by binary COPY.
COPY_FROM = 64
COPY_EVENTS = f"COPY agentlog_events ({_EVENT_COLUMNS}) FROM STDIN (FORMAT BINARY)"
COPY_TYPES = ("text", "int8", "text", "int8", "int4", "int8", "bytea", "int8")

#: RunInfo.needs_worker (rendered by ``claim_cases``), answered from the
#: indexes. Rows that another worker has locked (it is claiming them now) are
#: skipped, not waited for.
RUNNABLE = (
    f"SELECT {RUN_COLUMNS} FROM agentlog_runs WHERE {sql_needs_worker('%(now)s', '%(now)s')} "
    "ORDER BY coalesce(wake_at, updated_at) LIMIT %(limit)s FOR UPDATE SKIP LOCKED"
)
NEXT_WAKE = (
    "SELECT min(wake_at) FROM agentlog_runs WHERE status = 'waiting' AND wake_at IS NOT NULL"
)
READ_EVENTS = (
    "SELECT seq, type, ts, schema_v, writer_epoch, payload, checksum FROM agentlog_events "
    "WHERE run_id = %s AND seq > %s AND seq <= %s ORDER BY seq LIMIT %s"
)
