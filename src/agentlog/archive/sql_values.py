"""Query results as Python values, whatever DuckDB returned.

Arrow hands DuckDB's values to Python as they are, and some do not fit
Python's types: ``infinity`` dates and timestamps, timestamps past the year
9999, timestamps with nanoseconds. Those are shown as DuckDB's own text
for them instead of failing the whole result.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa

__all__ = ["python_rows"]


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


def _python_column(column: pa.Array | pa.ChunkedArray) -> list[Any]:
    try:
        values: list[Any] = column.to_pylist()
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
