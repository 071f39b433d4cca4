"""The small tasks table the archiver writes beside each events file, and the
``tasks`` view that reads it.

Grouping every task's events at query time costs a scan of every event and a
hash aggregation into millions of groups (issue 23: 7.9 s at 10M events). So
the archiver groups them once, when it writes a file: beside
``part-<hash>.parquet`` it writes ``part-<hash>.tasks.parquet`` (named in the
file's manifest entry, :attr:`ManifestEntry.tasks_file`), one row per
``(run_id, task_key)`` seen in that file, sorted by run and key.

A row holds *partial* aggregates, so that the parts of one task in several
places (a run archived in two passes, its newest events still hot) merge
exactly into what one grouping over all its events says: the starts
(``attempts``, the first start's ``name`` and ``step``, the earliest
``started``), the outcome with the highest seq (``outcome``, ``outcome_seq``),
the latest ``ended``, the last non-NULL ``duration_ms`` with its seq, and the
failure whose ``error`` the view shows (its seq and stored JSON; for an
encrypted run also its sealed bytes, which only a key holder opens, as in
``events``). A row may have no start (``attempts`` 0): a task started in an
earlier file and finished in this one.

The view (:data:`TASKS_DDL`) takes a tasks-table row as it is for a run that
lives in one file only and has no hot events (nearly every row), and groups
the parts of the others (:data:`_SPLIT_RUNS`, listed from the manifest and the
hot log when the connection opens), together with parts folded at query time
from the hot events and from events files that have no tasks table (archived
before it existed). A task that never started is left out, as before.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from agentlog.archive._sql_sealed import OPEN_FUNCTION

__all__ = [
    "TASKS_SCHEMA",
    "encode_tasks",
    "encode_tasks_table",
    "tasks_ddl",
    "tasks_key",
    "tasks_table",
]

#: The columns of a tasks table (partial aggregates of one file's task events).
TASKS_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("task_key", pa.string(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("step", pa.string()),
        pa.field("attempts", pa.int64(), nullable=False),
        pa.field("started", pa.timestamp("us", tz="UTC")),
        pa.field("outcome", pa.string()),
        pa.field("outcome_seq", pa.int64()),
        pa.field("ended", pa.timestamp("us", tz="UTC")),
        pa.field("duration_ms", pa.float64()),
        pa.field("duration_seq", pa.int64()),
        pa.field("error_seq", pa.int64()),
        pa.field("error_schema_v", pa.int32()),
        pa.field("error_payload", pa.binary()),
        pa.field("error_json", pa.string()),
    ]
)

_TASK_TYPES = "('TaskStarted', 'TaskCompleted', 'TaskFailed')"

# The failure whose error the view shows: the last one with an error, or (an
# encrypted run) the last one, whose error only its opened payload holds.
_FAILED = (
    "type = 'TaskFailed' AND ((payload_json ->> 'error') IS NOT NULL "
    "OR (payload_json ->> '_sealed') = 'true')"
)

#: One file's (or the hot log's) events grouped into task parts; ``{source}``
#: is a relation with the ``events`` columns, before sealed rows are opened.
PARTS_SQL = f"""
SELECT run_id, task_key,
       any_value(task_name) FILTER (WHERE type = 'TaskStarted') AS name,
       any_value(step) FILTER (WHERE type = 'TaskStarted') AS step,
       count(*) FILTER (WHERE type = 'TaskStarted') AS attempts,
       min(ts) FILTER (WHERE type = 'TaskStarted') AS started,
       arg_max(type, seq) FILTER (WHERE type <> 'TaskStarted') AS outcome,
       max(seq) FILTER (WHERE type <> 'TaskStarted') AS outcome_seq,
       max(ts) FILTER (WHERE type <> 'TaskStarted') AS ended,
       arg_max(duration_ms, seq) FILTER (WHERE type <> 'TaskStarted') AS duration_ms,
       max(seq) FILTER (WHERE type <> 'TaskStarted' AND duration_ms IS NOT NULL)
           AS duration_seq,
       max(seq) FILTER (WHERE {_FAILED}) AS error_seq,
       arg_max(schema_v, seq) FILTER (WHERE {_FAILED}) AS error_schema_v,
       arg_max(CASE WHEN (payload_json ->> '_sealed') = 'true' THEN payload END, seq)
           FILTER (WHERE {_FAILED}) AS error_payload,
       arg_max(payload_json, seq) FILTER (WHERE {_FAILED}) AS error_json
FROM ({{source}}) WHERE type IN {_TASK_TYPES} AND task_key IS NOT NULL
GROUP BY run_id, task_key
"""


def tasks_key(file: str) -> str:
    """The key of the tasks table beside the events file ``file``."""
    return file.removesuffix(".parquet") + ".tasks.parquet"


#: The ``events`` columns :data:`PARTS_SQL` reads besides the payload pair.
_PARTS_COLUMNS = (
    "run_id",
    "seq",
    "type",
    "ts",
    "schema_v",
    "step",
    "task_key",
    "task_name",
    "duration_ms",
)


def _parts_input(events: pa.Table) -> pa.Table:
    """``events`` as :data:`PARTS_SQL` reads them: the columns it uses, with the
    payload pair kept on failures only (the one row type whose payload it reads),
    so DuckDB scans a tenth of the bytes."""
    failed = pc.equal(events["type"], "TaskFailed")
    rows = len(events)
    return (
        events.select(list(_PARTS_COLUMNS))
        .append_column(
            "payload", pc.if_else(failed, events["payload"], pa.nulls(rows, pa.binary()))
        )
        .append_column(
            "payload_json", pc.if_else(failed, events["payload_json"], pa.nulls(rows, pa.string()))
        )
    )


def tasks_table(events: pa.Table) -> pa.Table:
    """The tasks table of one file's ``events`` (rows of the ``events`` columns),
    sorted by run and task key: :data:`PARTS_SQL` run by DuckDB, the definition
    that the archiver's fold (:mod:`agentlog.archive._tasks_fold`) is held to."""
    conn = duckdb.connect(config={"threads": 1})
    try:
        conn.register("_file_events", _parts_input(events))
        query = PARTS_SQL.format(source="SELECT * FROM _file_events")
        table = conn.sql(f"{query} ORDER BY run_id, task_key").to_arrow_table()
    finally:
        conn.close()
    return table.cast(TASKS_SCHEMA)


def encode_tasks(events: pa.Table, *, row_group_size: int = 65_536) -> bytes:
    """The Parquet bytes of the tasks table of ``events`` (:func:`encode_tasks_table`)."""
    return encode_tasks_table(tasks_table(events), row_group_size=row_group_size)


def encode_tasks_table(tasks: pa.Table, *, row_group_size: int = 65_536) -> bytes:
    """A tasks table's Parquet bytes: zstd, statistics on, and dictionaries on
    the few-valued text (a query groups by ``name``)."""
    sink = pa.BufferOutputStream()
    pq.write_table(
        tasks,
        sink,
        compression="zstd",
        row_group_size=row_group_size,
        use_dictionary=["name", "step", "outcome"],
        write_statistics=True,
    )
    return bytes(sink.getvalue().to_pybytes())


def _error(opens: bool, prefix: str = "") -> str:
    """The ``error`` column from a part's stored failure: opened when sealed and
    the connection holds a cipher (the ``events`` view's function)."""
    json = f"{prefix}error_json"
    if not opens:
        return f"{json} ->> 'error'"
    return (
        f"(CASE WHEN ({json} ->> '_sealed') = 'true' THEN {OPEN_FUNCTION}(run_id, "
        f"{prefix}error_seq, 'TaskFailed', {prefix}error_schema_v, {prefix}error_payload, "
        f"{json}) ELSE {json} END) ->> 'error'"
    )


def _final(source: str, opens: bool) -> str:
    """The view's columns from whole-task rows of ``source``."""
    return f"""
SELECT run_id, task_key AS key, name, step, attempts,
       CASE outcome WHEN 'TaskCompleted' THEN 'completed' WHEN 'TaskFailed' THEN 'failed'
            ELSE 'pending' END AS status,
       started, ended,
       coalesce(nullif(duration_ms, 0),
                date_diff('microsecond', started, ended) / 1000.0) AS duration_ms,
       {_error(opens)} AS error
FROM {source} WHERE attempts > 0"""


# The parts of one task, wherever they are, merged as one grouping over all its
# events would have: counts add up, the latest outcome wins (by seq), and so on.
_MERGED = """
SELECT run_id, task_key, any_value(name) AS name, any_value(step) AS step,
       CAST(sum(attempts) AS BIGINT) AS attempts, min(started) AS started,
       arg_max(outcome, outcome_seq) AS outcome, max(ended) AS ended,
       arg_max(duration_ms, duration_seq) AS duration_ms,
       max(error_seq) AS error_seq,
       arg_max(error_schema_v, error_seq) AS error_schema_v,
       arg_max(error_payload, error_seq) AS error_payload,
       arg_max(error_json, error_seq) AS error_json
FROM _task_parts GROUP BY run_id, task_key
"""


def tasks_ddl(opens: bool, split: bool = True) -> tuple[str, ...]:
    """The statements that create the ``tasks`` view.

    They read ``_task_rows`` (the tasks tables), ``_split_runs`` (the runs
    whose parts must be merged), ``_untabled_events`` (events files without
    a tasks table) and ``_hot_events``. ``opens``: the connection has the
    function that opens sealed rows; ``split``: some run's parts must be
    merged (else no row of a tasks table is checked against ``_split_runs``).
    """
    stored = "SELECT * FROM _untabled_events UNION ALL BY NAME SELECT * FROM _hot_events"
    parts = f"""
CREATE VIEW _task_parts AS
SELECT * FROM _task_rows WHERE run_id IN (SELECT run_id FROM _split_runs)
UNION ALL BY NAME
{PARTS_SQL.format(source=stored)}
"""
    whole = (
        "(SELECT * FROM _task_rows WHERE run_id NOT IN (SELECT run_id FROM _split_runs))"
        if split
        else "_task_rows"
    )
    view = f"""
CREATE VIEW tasks AS
{_final(whole, opens)}
UNION ALL
{_final(f"({_MERGED})", opens)}
"""
    return (parts, view)
