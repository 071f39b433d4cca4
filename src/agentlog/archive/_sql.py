"""SQL over the archive and the hot log together, with DuckDB.

Views:

* ``events``: one row per event (the Parquet columns, see
  :mod:`agentlog.archive._parquet`), archived runs and hot runs together. The
  archive part reads exactly the files in the manifest; the hot part is read
  through the EventLog seam (so it works for every backend) and holds only
  the events the archive does not have yet, so no event is counted twice.
* ``runs``: one row per run: workflow, version, status, steps, events,
  started, ended, duration (seconds, a DOUBLE; NULL until the run ends), error.
* ``tasks``: one row per side effect (run_id, key): name, step, attempts,
  status, started, ended, duration_ms, error. Read from the archive's tasks
  tables, not its events (:mod:`agentlog.archive._tasks_table`).
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
is NULL while type, seq, ts and task_name stay (:mod:`agentlog.archive._sql_sealed`).

The connection is read-only over these views: only ``SELECT`` (and
``EXPLAIN``) statements run, one per query; DuckDB's external access is switched off after
the views are built, with only the manifest's files readable, and the
configuration is locked, so a query cannot ``COPY``, ``ATTACH``, change
settings, define or drop anything, or read any other file.

Nothing is spilled to disk: the connection has no temporary directory, so a
query that needs more than its memory limit fails with
:class:`~agentlog.archive._errors.SqlLimitError` instead of writing its
intermediate rows, decrypted payloads included, to DuckDB's ``.tmp`` folder
(which DuckDB would also have left readable to every query).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from agentlog.archive._errors import ArchiveCorruptError, ArchiveQueryError, SqlLimitError
from agentlog.archive._parquet import EVENT_SCHEMA, Manifest, events_to_table
from agentlog.archive._sql_sealed import SealedRowOpener, events_view
from agentlog.archive._sql_values import python_rows
from agentlog.archive._sql_views import VIEW_DDL, VIEWS
from agentlog.archive._store import ArchiveStore
from agentlog.archive._tasks_table import TASKS_SCHEMA, tasks_ddl
from agentlog.crypto import KeyStore, PayloadCipher
from agentlog.errors import RunArchivedError
from agentlog.eventlog._base import EventReader

__all__ = [
    "VIEWS",
    "ArchiveSQL",
    "SqlSource",
    "connect",
    "memory_error",
    "open_sql",
    "python_rows",
    "sql_cipher",
    "sql_source",
]

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
        #: The bytes the whole process may hold, when it runs in a query process of
        #: its own (:mod:`agentlog.archive._sql_process`); None in the caller's process.
        self.process_bound: int | None = None

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
            return memory_error(query, self.memory_limit, self.process_bound)
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


def memory_error(query: str, memory_limit: str, bound: int | None = None) -> SqlLimitError:
    """The query ran out of memory: its DuckDB limit, or its process's whole bound."""
    process = (
        ""
        if bound is None
        else f" (its query process may hold {bound:,} bytes in all: the limit plus a fixed "
        "overhead for DuckDB, Python and the rows read)"
    )
    return SqlLimitError(
        query,
        "memory",
        f"the query needs more memory than its limit of {memory_limit}{process}, and "
        "agentlog's SQL never spills to disk (so no decrypted payload is written "
        "there). Narrow the query (a WHERE, fewer or shorter columns, a LIMIT) or "
        "raise the limit: `agentlog ui --sql-memory-limit`, `agentlog sql "
        "--memory-limit`, open_sql(memory_limit=...)",
        VIEWS,
    )


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


@dataclass(frozen=True)
class SqlSource:
    """What the views read, gathered where the hot log is open: the archive's
    files, the hot events the archive does not hold yet, and the statements
    that let DuckDB read the files (the S3 secret). Plain data, so a query
    process of its own (:mod:`agentlog.archive._sql_process`) can build the
    same views from it."""

    setup: tuple[str, ...]
    """Statements run on the connection first (:meth:`ArchiveStore.configure_duckdb`)."""
    files: tuple[str, ...]
    """The manifest's Parquet files, as DuckDB reads them (paths or s3:// URLs)."""
    hot: pa.Table
    """The hot events not archived yet, as rows of the ``events`` view."""
    tables: tuple[str, ...] = ()
    """The tasks table beside each of :attr:`files`, or "" where there is none
    (a file archived before tasks tables existed); empty: none has one."""
    split_runs: tuple[str, ...] = ()
    """The runs whose tasks are in more than one place (several files, or hot
    events too): the ``tasks`` view merges their parts."""


class _Recorder:
    """Stands in for a connection: keeps the statements a store would run on it."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def execute(self, statement: str) -> None:
        self.statements.append(statement)


async def sql_source(store: ArchiveStore | None, log: EventReader | None) -> SqlSource:
    """The archive's files and the hot events not archived yet (see :class:`SqlSource`)."""
    recorder = _Recorder()
    manifest = Manifest()
    files: list[str] = []
    tables: list[str] = []
    if store is not None:
        store.configure_duckdb(recorder)
        manifest = Manifest.load(store)
        for key in sorted(manifest.entries):
            tasks = manifest.entries[key].tasks_file
            files.append(store.location(key))
            tables.append(store.location(tasks) if tasks else "")
    hot = await _hot_table(log, manifest) if log is not None else EVENT_SCHEMA.empty_table()
    split = {run for run, segs in manifest.segments.items() if len(segs) > 1}
    split.update(hot.column("run_id").unique().to_pylist())
    return SqlSource(
        tuple(recorder.statements), tuple(files), hot, tuple(tables), tuple(sorted(split))
    )


def sql_cipher(
    keys: KeyStore | PayloadCipher | None, log: EventReader | None
) -> PayloadCipher | None:
    """The cipher that opens sealed rows: ``keys``, else the hot log's, else None."""
    if isinstance(keys, KeyStore):
        return PayloadCipher(keys)
    return keys if keys is not None else (log.cipher if log is not None else None)


async def open_sql(
    store: ArchiveStore | None = None,
    log: EventReader | None = None,
    *,
    memory_limit: str = "",
    threads: int = 0,
    keys: KeyStore | PayloadCipher | None = None,
) -> ArchiveSQL:
    """A DuckDB connection whose views cover ``store``'s archive and ``log``'s hot events.

    The connection lives in this process, so DuckDB's memory limit binds
    DuckDB's own buffers only; :func:`agentlog.archive._sql_process.run_query`
    runs a query in a process of its own whose whole memory is bounded.

    Args:
        store: the archive; None for the hot log only.
        log: the hot log; None for the archive only.
        memory_limit: a DuckDB memory limit such as ``"1GB"`` (default: DuckDB's, 80%
            of the RAM). Nothing spills to disk, so a query whose DuckDB
            buffers need more fails with :class:`SqlLimitError`.
        threads: the most threads a query uses (0: DuckDB's default, every core).
        keys: opens encrypted runs' content in ``payload_json``; None: the hot
            log's cipher, if any. Without keys, sealed rows show their metadata.
    """
    source = await sql_source(store, log)
    return connect(source, sql_cipher(keys, log), memory_limit=memory_limit, threads=threads)


def connect(
    source: SqlSource,
    cipher: PayloadCipher | None,
    *,
    memory_limit: str = "",
    threads: int = 0,
) -> ArchiveSQL:
    """The locked-down connection with the views over ``source`` (see :func:`open_sql`)."""
    conn = duckdb.connect(config=_NO_SPILL)
    try:
        if memory_limit:
            conn.execute(f"SET memory_limit = '{memory_limit}'")
        if threads:
            conn.execute(f"SET threads = {int(threads)}")
        conn.execute("SET parquet_metadata_cache = true")
        for statement in source.setup:
            conn.execute(statement)
        conn.register("_hot_events", source.hot)
        tables = source.tables or ("",) * len(source.files)
        untabled = tuple(f for f, t in zip(source.files, tables, strict=True) if not t)
        _parquet_view(conn, "_archived_events", source.files, EVENT_SCHEMA)
        _parquet_view(conn, "_untabled_events", untabled, EVENT_SCHEMA)
        _parquet_view(conn, "_task_rows", tuple(t for t in tables if t), TASKS_SCHEMA)
        conn.register("_split_runs", pa.table({"run_id": pa.array(source.split_runs, pa.string())}))
        opener = events_view(conn, cipher)
        for ddl in (*VIEW_DDL, *tasks_ddl(opener is not None, bool(source.split_runs))):
            conn.execute(ddl)
        _lock_down(conn, source.files + tuple(t for t in tables if t))
        limit = memory_limit or str(
            conn.sql("SELECT current_setting('memory_limit')").fetchall()[0][0]
        )
    except duckdb.Error as exc:
        conn.close()
        raise _translate("(creating the views)", exc) from exc
    except BaseException:
        conn.close()
        raise
    return ArchiveSQL(conn, len(source.files), len(source.hot), opener, memory_limit=limit)


def _parquet_view(conn: Any, name: str, files: tuple[str, ...], schema: pa.Schema) -> None:
    """``name``: the rows of the Parquet ``files``, or an empty table of ``schema``."""
    if not files:
        conn.register(name, schema.empty_table())
        return
    listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    conn.execute(
        f"CREATE VIEW {name} AS SELECT * FROM read_parquet([{listed}], hive_partitioning=false)"
    )


def _lock_down(conn: Any, files: tuple[str, ...]) -> None:
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
