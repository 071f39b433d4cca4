"""SQL over the archive and the hot log together, with DuckDB.

Views:

* ``events``: one row per event (the Parquet columns, see
  :mod:`agentlog.archive.writer`), archived runs and hot runs together. The
  archive part reads exactly the files in the manifest; the hot part is read
  through the EventLog seam (so it works for every backend) and holds only
  the events the archive does not have yet, so no event is counted twice.
* ``runs``: one row per run: workflow, version, status, steps, events,
  started, ended, duration (seconds, a DOUBLE; NULL until the run ends), error.
* ``tasks``: one row per side effect (run_id, key): name, step, attempts,
  status, started, ended, duration_ms, error.
* ``interrupts``: one row per interrupt: what was asked, when, what was
  answered, and how long it waited (``waited``, seconds as a DOUBLE; NULL
  while it still waits).
* ``checkpoints``: one row per LangGraph checkpoint (:mod:`agentlog.langgraph`;
  the thread is the run): thread_id, ns, checkpoint_id, parent_id, seq, ts,
  step, source, the channels it changed, its bytes, and whether it was
  removed (``delete_thread``, ``prune``...).
* ``checkpoint_writes``: one row per pending write of a LangGraph task:
  thread_id, ns, checkpoint_id, task_id, task_path, channel, idx, value type
  and bytes (LangGraph's interrupts are the ``__interrupt__`` channel).

Durations are plain seconds, not DuckDB intervals, so every output format
(CSV, JSON, Parquet) can carry them.

Encrypted runs: their rows hold the clear metadata, and ``payload_json`` is
the full JSON only for a user who holds the keys (``keys=``, or the hot log's
cipher; the CLI's ``AGENTLOG_KEYRING``); for anyone else, and after a shred,
it is the metadata with ``"_sealed": true``, so ``payload_json ->> 'result'``
is NULL while type, seq, ts and task_name stay (:mod:`agentlog.archive.sql_sealed`).

The connection is read-only over these views: only ``SELECT`` (and
``EXPLAIN``) statements run, one per query; DuckDB's external access is switched off after
the views are built, with only the manifest's files readable, and the
configuration is locked, so a query cannot ``COPY``, ``ATTACH``, change
settings, define or drop anything, or read any other file.

Nothing is spilled to disk: the connection has no temporary directory, so a
query that needs more than its memory limit fails with
:class:`~agentlog.archive.errors.SqlLimitError` instead of writing its
intermediate rows, decrypted payloads included, to DuckDB's ``.tmp`` folder
(which DuckDB would also have left readable to every query).
"""

from __future__ import annotations

import re
from typing import Any

import duckdb
import pyarrow as pa

from agentlog.archive.errors import ArchiveCorruptError, ArchiveQueryError, SqlLimitError
from agentlog.archive.sql_sealed import SealedRowOpener, events_view
from agentlog.archive.sql_values import python_rows
from agentlog.archive.store import ArchiveStore
from agentlog.archive.writer import EVENT_SCHEMA, Manifest, events_to_table
from agentlog.crypto import KeyStore, PayloadCipher
from agentlog.errors import RunArchivedError
from agentlog.eventlog.base import EventReader

__all__ = ["VIEWS", "ArchiveSQL", "open_sql", "python_rows"]

#: The view names, in the order ``--help`` lists them.
VIEWS = ("events", "runs", "tasks", "interrupts", "checkpoints", "checkpoint_writes")

_STATUS_CASE = """CASE type
    WHEN 'RunStarted' THEN 'running' WHEN 'InterruptRaised' THEN 'waiting'
    WHEN 'ResumeReceived' THEN 'running' WHEN 'RunCompleted' THEN 'completed'
    WHEN 'RunFailed' THEN 'failed' WHEN 'RunCancelled' THEN 'cancelled'
    WHEN 'RunShredded' THEN 'shredded' END"""

_RUNS = f"""
CREATE VIEW runs AS
SELECT run_id,
       max(workflow) AS workflow,
       max(version) AS version,
       coalesce(arg_max({_STATUS_CASE}, seq) FILTER (WHERE type IN ('RunStarted',
           'InterruptRaised', 'ResumeReceived', 'RunCompleted', 'RunFailed',
           'RunCancelled', 'RunShredded')), 'running') AS status,
       count(*) FILTER (WHERE type = 'StepCompleted') AS steps,
       count(*) AS events,
       min(ts) AS started,
       max(ts) FILTER (WHERE type IN ('RunCompleted', 'RunFailed', 'RunCancelled')) AS ended,
       date_diff('microsecond', min(ts), max(ts) FILTER (WHERE type IN ('RunCompleted',
           'RunFailed', 'RunCancelled'))) / 1e6 AS duration,
       arg_max(payload_json ->> 'error', seq) FILTER (WHERE type = 'RunFailed') AS error
FROM events GROUP BY run_id
"""

_TASKS = """
CREATE VIEW tasks AS
WITH started AS (
    SELECT run_id, task_key, any_value(task_name) AS name, any_value(step) AS step,
           count(*) AS attempts, min(ts) AS started
    FROM events WHERE type = 'TaskStarted' GROUP BY run_id, task_key
), ended AS (
    SELECT run_id, task_key, arg_max(type, seq) AS outcome, max(ts) AS ended,
           arg_max(duration_ms, seq) AS duration_ms,
           arg_max(payload_json ->> 'error', seq) FILTER (WHERE type = 'TaskFailed') AS error
    FROM events WHERE type IN ('TaskCompleted', 'TaskFailed') GROUP BY run_id, task_key
)
SELECT s.run_id, s.task_key AS key, s.name, s.step, s.attempts,
       CASE e.outcome WHEN 'TaskCompleted' THEN 'completed' WHEN 'TaskFailed' THEN 'failed'
            ELSE 'pending' END AS status,
       s.started, e.ended,
       coalesce(nullif(e.duration_ms, 0),
                date_diff('microsecond', s.started, e.ended) / 1000.0) AS duration_ms,
       e.error
FROM started s LEFT JOIN ended e USING (run_id, task_key)
"""

_INTERRUPTS = """
CREATE VIEW interrupts AS
WITH raised AS (
    SELECT run_id, seq, ts, step, payload_json -> '$.payload' AS asked
    FROM events WHERE type = 'InterruptRaised'
), resumed AS (
    SELECT run_id, seq, ts, payload_json -> '$.value' AS answer
    FROM events WHERE type = 'ResumeReceived'
)
SELECT r.run_id, r.seq, r.step, r.asked, r.ts AS raised_at,
       a.answer, a.ts AS answered_at, date_diff('microsecond', r.ts, a.ts) / 1e6 AS waited
FROM raised r ASOF LEFT JOIN resumed a ON r.run_id = a.run_id AND r.seq < a.seq
"""

# A checkpoint counts as removed once a later CheckpointsRemoved names it, or
# the whole thread. Values stay opaque here: they are the serializer's bytes.
_CHECKPOINTS = """
CREATE VIEW checkpoints AS
WITH saved AS (
    SELECT run_id AS thread_id, seq, ts, payload_json ->> 'ns' AS ns,
           payload_json ->> 'checkpoint_id' AS checkpoint_id,
           payload_json ->> 'parent_id' AS parent_id,
           TRY_CAST(payload_json -> '$.metadata' ->> 'step' AS BIGINT) AS step,
           payload_json -> '$.metadata' ->> 'source' AS source,
           CAST(json_transform(payload_json -> '$.values', '["JSON"]') AS JSON[]) AS changed,
           octet_length(payload) AS bytes
    FROM events WHERE type = 'CheckpointSaved'
), removals AS (
    SELECT run_id AS thread_id, seq, payload_json -> '$.checkpoints' AS listed,
           coalesce(TRY_CAST(payload_json ->> 'everything' AS BOOLEAN), false) AS everything
    FROM events WHERE type = 'CheckpointsRemoved'
)
SELECT s.thread_id, s.ns, s.checkpoint_id, s.parent_id, s.seq, s.ts, s.step, s.source,
       list_transform(s.changed, x -> json_extract_string(x, '$[0]')) AS channels, s.bytes,
       EXISTS (SELECT 1 FROM removals r WHERE r.thread_id = s.thread_id AND r.seq > s.seq
               AND (r.everything OR json_contains(r.listed, json_array(s.ns, s.checkpoint_id))))
           AS removed
FROM saved s
"""

_CHECKPOINT_WRITES = """
CREATE VIEW checkpoint_writes AS
WITH saved AS (
    SELECT run_id AS thread_id, seq, ts, payload_json ->> 'ns' AS ns,
           payload_json ->> 'checkpoint_id' AS checkpoint_id,
           payload_json ->> 'task_id' AS task_id, payload_json ->> 'task_path' AS task_path,
           unnest(CAST(json_transform(payload_json -> '$.writes', '["JSON"]') AS JSON[])) AS w
    FROM events WHERE type = 'WritesSaved'
)
SELECT thread_id, ns, checkpoint_id, task_id, task_path, w ->> 0 AS channel,
       TRY_CAST(w ->> 1 AS BIGINT) AS idx, w ->> 2 AS value_type, seq, ts
FROM saved
"""

_READ_ONLY = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})

#: Rows per Arrow batch when only the first rows of a result are wanted: small,
#: so that reading stops within one batch of a bound on the rows or their bytes.
_BATCH_ROWS = 64

#: No spilling: with no temporary directory DuckDB neither writes a query's
#: rows to disk nor adds a folder (``.tmp`` by default) to the paths a query
#: may read once external access is off.
_NO_SPILL: dict[str, str | bool | int | float | list[str]] = {
    "temp_directory": "",
    "max_temp_directory_size": "0B",
}


class ArchiveSQL:
    """A DuckDB connection with the agentlog views. Close it when done."""

    def __init__(
        self,
        conn: Any,
        archived_files: int,
        hot_events: int,
        opener: SealedRowOpener | None = None,
        memory_limit: str = "",
    ) -> None:
        self.conn = conn
        #: How many Parquet files the ``events`` view reads.
        self.archived_files = archived_files
        #: How many hot (not yet archived) events the ``events`` view holds.
        self.hot_events = hot_events
        #: Opens sealed rows (None: no keys, sealed rows show their metadata only).
        self.opener = opener
        #: The memory limit of this connection, as given (or as DuckDB writes its default).
        self.memory_limit = memory_limit

    def sql(self, query: str, params: list[Any] | None = None) -> Any:
        """Run the read-only ``query``; return a DuckDB relation.

        Raises:
            ArchiveQueryError: an empty query, a statement other than SELECT or
                EXPLAIN, or DuckDB rejected the query; names the views.
            ArchiveCorruptError: an archive file did not read.
        """
        self._check_read_only(query)
        if self.opener is not None:
            self.opener.error = None
        try:
            if params:
                return self.conn.execute(query, params)
            return self.conn.sql(query)
        except duckdb.Error as exc:
            raise self._translate(query, exc) from exc

    def _translate(self, query: str, exc: Exception) -> Exception:
        # A sealed row that failed to open (tampered, key store down) failed the
        # query inside the function: raise its typed error, which names run and seq.
        if self.opener is not None and self.opener.error is not None:
            return self.opener.error
        if isinstance(exc, duckdb.OutOfMemoryException):
            return SqlLimitError(
                query,
                "memory",
                f"the query needs more memory than its limit of {self.memory_limit}, and "
                "agentlog's SQL never spills to disk (so no decrypted payload is written "
                "there). Narrow the query (a WHERE, fewer or shorter columns, a LIMIT) or "
                "raise the limit: `agentlog ui --sql-memory-limit`, `agentlog sql "
                "--memory-limit`, open_sql(memory_limit=...)",
                VIEWS,
            )
        return _translate(query, exc)

    def _check_read_only(self, query: str) -> None:
        try:
            statements = self.conn.extract_statements(query)
        except duckdb.Error as exc:
            raise _translate(query, exc) from exc
        if not statements:
            raise ArchiveQueryError(query, "the statement is empty; write a SELECT", VIEWS)
        for statement in statements:
            if statement.type not in _READ_ONLY:
                kind = statement.type.name
                raise ArchiveQueryError(
                    query,
                    f"{kind} statements are not allowed: `agentlog sql` is read-only over its "
                    "views (SELECT and EXPLAIN only); to save rows use --format csv|json|parquet "
                    "with --out FILE",
                    VIEWS,
                )
        if len(statements) > 1:
            # DuckDB would run them all and return the last one's rows only.
            raise ArchiveQueryError(
                query,
                f"the query holds {len(statements)} statements and runs one at a time: "
                "send each SELECT on its own (a `;` ends a statement), or combine them "
                "into one with UNION ALL or a JOIN",
                VIEWS,
            )

    def arrow(self, query: str, params: list[Any] | None = None) -> pa.Table:
        """Run ``query``; return its rows as an Arrow table."""
        try:
            result = self.sql(query, params)
            if result is None:
                return pa.table({})
            return result.to_arrow_table()
        except duckdb.Error as exc:
            raise self._translate(query, exc) from exc

    def head(
        self,
        query: str,
        limit: int,
        params: list[Any] | None = None,
        *,
        max_bytes: int | None = None,
    ) -> tuple[pa.Table, bool]:
        """Run ``query``; return at most its first ``limit`` rows, and whether it had more.

        The rows are read a batch at a time and reading stops after row
        ``limit + 1``, so a huge result is neither fetched nor held. With
        ``max_bytes``, rows whose Arrow buffers hold more than that many
        bytes stop the query: a few rows of huge values are bounded too.

        Raises:
            SqlLimitError: the rows read hold more than ``max_bytes``, or the
                query needs more than the connection's memory limit.
        """
        try:
            result = self.sql(query, params)
            if result is None:
                return pa.table({}), False
            reader = result.to_arrow_reader(_BATCH_ROWS)
            batches, count, held = [], 0, 0
            for batch in reader:
                batches.append(batch)
                count += batch.num_rows
                held += batch.nbytes
                if max_bytes is not None and held > max_bytes:
                    raise _too_big(query, count, held, max_bytes)
                if count > limit:
                    break
            table = pa.Table.from_batches(batches, schema=reader.schema)
            return table.slice(0, limit), count > limit
        except duckdb.Error as exc:
            raise self._translate(query, exc) from exc

    def interrupt(self) -> None:
        """Stop the query running on this connection (from another thread):
        it fails with ArchiveQueryError."""
        self.conn.interrupt()

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def __enter__(self) -> ArchiveSQL:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _too_big(query: str, rows: int, held: int, max_bytes: int) -> SqlLimitError:
    return SqlLimitError(
        query,
        "result",
        f"its first {rows:,} rows hold {held:,} bytes, more than the {max_bytes:,} bytes a "
        "result may hold here. Narrow the query (fewer or shorter columns, such as "
        "left(payload_json, 1000), or a LIMIT) or raise the limit: `agentlog ui "
        "--sql-max-result`",
        VIEWS,
    )


def _translate(query: str, exc: Exception) -> Exception:
    message = str(exc).strip()
    lowered = message.lower()
    if "parquet" in lowered and (
        "magic" in lowered or "corrupt" in lowered or "invalid" in lowered
    ):
        named = re.search(r"file '([^']+)'", message)
        where = named.group(1) if named else "(one of the archive files)"
        return ArchiveCorruptError(where, message.splitlines()[0])
    # DuckDB's message keeps its lines: a caret (^) under the query points at the error.
    return ArchiveQueryError(query, message, VIEWS)


async def open_sql(
    store: ArchiveStore | None = None,
    log: EventReader | None = None,
    *,
    memory_limit: str = "",
    threads: int = 0,
    keys: KeyStore | PayloadCipher | None = None,
) -> ArchiveSQL:
    """A DuckDB connection whose views cover ``store``'s archive and ``log``'s hot events.

    Args:
        store: the archive; None for the hot log only.
        log: the hot log; None for the archive only.
        memory_limit: a DuckDB memory limit such as ``"1GB"`` (default: DuckDB's, 80%
            of the RAM). It is a hard limit: nothing spills to disk, so a query
            that needs more fails with :class:`SqlLimitError`.
        threads: the most threads a query uses (0: DuckDB's default, every core).
        keys: opens encrypted runs' content in ``payload_json``; None: the hot
            log's cipher, if any. Without keys, sealed rows show their metadata.
    """
    if isinstance(keys, KeyStore):
        keys = PayloadCipher(keys)
    cipher = keys if keys is not None else (log.cipher if log is not None else None)
    conn = duckdb.connect(config=_NO_SPILL)
    try:
        if memory_limit:
            conn.execute(f"SET memory_limit = '{memory_limit}'")
        if threads:
            conn.execute(f"SET threads = {int(threads)}")
        conn.execute("SET parquet_metadata_cache = true")
        manifest = Manifest()
        files: list[str] = []
        if store is not None:
            store.configure_duckdb(conn)
            manifest = Manifest.load(store)
            files = [store.location(key) for key in sorted(manifest.entries)]
        hot = await _hot_table(log, manifest) if log is not None else EVENT_SCHEMA.empty_table()
        conn.register("_hot_events", hot)
        if files:
            listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
            conn.execute(
                "CREATE VIEW _archived_events AS SELECT * FROM "
                f"read_parquet([{listed}], hive_partitioning=false)"
            )
        else:
            conn.register("_archived_events", EVENT_SCHEMA.empty_table())
        opener = events_view(conn, cipher)
        for ddl in (_RUNS, _TASKS, _INTERRUPTS, _CHECKPOINTS, _CHECKPOINT_WRITES):
            conn.execute(ddl)
        _lock_down(conn, files)
        limit = memory_limit or str(
            conn.sql("SELECT current_setting('memory_limit')").fetchall()[0][0]
        )
    except duckdb.Error as exc:
        conn.close()
        raise _translate("(creating the views)", exc) from exc
    except BaseException:
        conn.close()
        raise
    return ArchiveSQL(conn, len(files), len(hot), opener, memory_limit=limit)


def _lock_down(conn: Any, files: list[str]) -> None:
    """From here on the connection reads the archive's own files and nothing else.

    The S3 secret and the httpfs extension were set up before this; the
    views read exactly ``files`` (local paths or s3:// URLs), which stay
    allowed. DuckDB also allows its temporary directory; the connection has
    none (:data:`_NO_SPILL`), so nothing else is. Locking the configuration
    keeps a query from switching any of this back on.
    """
    if files:
        listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        conn.execute(f"SET allowed_paths = [{listed}]")
    conn.execute("SET enable_external_access = false")
    conn.execute("SET lock_configuration = true")


async def _hot_table(log: EventReader, manifest: Manifest) -> pa.Table:
    """The hot events the archive does not hold yet, as rows of the events view."""
    tables = []
    for info in await log.list_runs():
        upto = manifest.archived_upto(info.run_id)
        if info.last_seq <= upto:
            continue
        try:
            events = [e async for e in log.read(info.run_id, after_seq=upto)]
        except RunArchivedError:
            continue  # pruned into another archive than the one queried here
        if events:
            tables.append(events_to_table(events, workflow=info.workflow, version=info.version))
    return pa.concat_tables(tables) if tables else EVENT_SCHEMA.empty_table()
