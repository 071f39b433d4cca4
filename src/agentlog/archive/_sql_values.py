"""Query results as Python values, whatever DuckDB returned.

Arrow hands DuckDB's values to Python as they are, and some do not fit
Python's types: ``infinity`` dates and timestamps, timestamps past the year
9999, timestamps with nanoseconds. Those are shown as DuckDB's own text
for them instead of failing the whole result.

CSV has no nested values and Arrow's CSV writer refuses them (and a few
other types): :func:`csv_ready` turns those columns into text first.
"""

from __future__ import annotations

from typing import Any

import duckdb
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from agentlog.eventlog._packing import jsonable

__all__ = ["csv_ready", "python_rows"]


def python_rows(table: pa.Table | pa.RecordBatch) -> list[list[Any]]:
    """``table``'s rows as lists of Python values.

    A value Python cannot hold (a date or timestamp ``infinity``, one past the
    year 9999, a timestamp with nanoseconds) is DuckDB's text for it
    (``'infinity'``, ``'10000-01-01 00:00:00'``), not an error.
    """
    columns = [_python_column(column) for column in table.columns]
    if not columns:
        return [[] for _ in range(table.num_rows)]
    return [list(row) for row in zip(*columns, strict=True)]


def csv_ready(table: pa.Table) -> pa.Table:
    """``table`` with every column in a form Arrow's CSV writer can write.

    A list, struct, map or union value becomes its JSON text (a map as a JSON
    object), so ``SELECT * FROM checkpoints`` exports as CSV. A column Arrow
    has no text for (an interval, bytes that are not UTF-8) becomes DuckDB's
    text for it. Every other column is left as it is, so numbers stay unquoted.
    """
    columns = [_csv_column(column) for column in table.columns]
    return pa.Table.from_arrays(columns, names=table.column_names)


def _csv_column(column: pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    if pa.types.is_nested(column.type):
        values = _python_column(column, maps_as_dicts=True)
        return pa.array([_json_text(value) for value in values], pa.string())
    try:
        pc.cast(column, pa.string())  # what the CSV writer does with each column
    except pa.ArrowException:
        return pa.array(_duckdb_text(column), pa.string())
    return column


def _json_text(value: Any) -> str | None:
    return None if value is None else orjson.dumps(jsonable(value)).decode()


def _python_column(column: pa.Array | pa.ChunkedArray, *, maps_as_dicts: bool = False) -> list[Any]:
    try:
        # DuckDB's map keys are unique, so "lossy" never drops a key here.
        values: list[Any] = (
            column.to_pylist(maps_as_pydicts="lossy") if maps_as_dicts else column.to_pylist()
        )
        return values
    except (OverflowError, ValueError, pa.ArrowException):
        pass
    text = _duckdb_text(column)
    values = []
    for i, fallback in enumerate(text):
        try:
            values.append(column[i].as_py())
        except (OverflowError, ValueError, pa.ArrowException):
            values.append(fallback)
    return values


def _duckdb_text(column: pa.Array | pa.ChunkedArray) -> list[str | None]:
    """Each value as DuckDB writes it (``CAST(... AS VARCHAR)``), from a
    connection of its own: the query's connection is locked down."""
    conn = duckdb.connect()
    try:
        relation = conn.from_arrow(pa.table({"v": column}))
        return [row[0] for row in relation.project("CAST(v AS VARCHAR)").fetchall()]
    finally:
        conn.close()
