"""The run list of a backend with a SQL run index table, written once.

SQLite and PostgreSQL keep the run index as a table of
:data:`~agentlog.eventlog._row_format.RUN_COLUMNS`, so their ``list_runs``,
``page_runs`` and ``list_workflows`` are the same statements in two
dialects (:class:`SqlDialect`: the table, the placeholder style, substring
search and how run ids compare). A page is one indexed query for its rows
and one for the counts (:func:`~agentlog.eventlog._run_pages.page_sql`), so
a list of 100,000 runs reads one page; where the backend keeps a table of
counts per status (SQLite), an unfiltered page reads those few rows. A backend gives one hook,
:meth:`SqlIndexedEventLog._select`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from agentlog.eventlog._base import RunInfo, check_run_id
from agentlog.eventlog._claim_cases import sql_lease_ended, sql_lease_live
from agentlog.eventlog._indexed import IndexedEventLog
from agentlog.eventlog._row_format import RUN_COLUMNS, info_from_row, to_us
from agentlog.eventlog._run_pages import RunQuery, RunsPage, page_from_counts, page_sql

__all__ = ["SqlDialect", "SqlIndexedEventLog", "Statement"]

#: One SQL statement and its named parameters.
Statement = tuple[str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class SqlDialect:
    """What differs between the SQL of two run index tables."""

    table: str
    """The run index table (``runs``, ``agentlog_runs``)."""
    param: Callable[[str], str]
    """A named placeholder in the driver's style (``:x``, ``%(x)s``)."""
    contains: str
    """``{col}`` contains ``{arg}`` as a SQL template (see :func:`page_sql`)."""
    collate: str = ""
    """What makes run ids compare by code point, as Python does."""
    counts_table: str | None = None
    """A table of the listed runs per status kept with the index, if any."""
    indexed_by: bool = False
    """Name the index a queue's reads must use (SQLite's ``INDEXED BY``: with
    no statistics its planner takes the index of ``status`` and sorts)."""

    def using(self, suffix: str) -> str:
        """The run index table, naming its index ``<table>_<suffix>`` where
        the dialect can (:attr:`indexed_by`)."""
        return f"{self.table} INDEXED BY {self.table}_{suffix}" if self.indexed_by else self.table


class SqlIndexedEventLog(IndexedEventLog):
    """An indexed log whose run index is a SQL table (see the module docstring)."""

    _dialect: ClassVar[SqlDialect]

    @staticmethod
    def _distinct_run_ids(run_ids: Sequence[str]) -> list[str]:
        """``run_ids`` checked, each once, in order (for :meth:`prune_many`)."""
        for run_id in run_ids:
            check_run_id(run_id)
        return list(dict.fromkeys(run_ids))

    @abc.abstractmethod
    async def _select(self, *statements: Statement) -> list[list[Any]]:
        """The rows of each statement, in order (in one round trip where it can)."""

    async def prune(self, run_id: str, *, keep_latest_snapshot: bool = False) -> None:
        await self.prune_many([run_id], keep_latest_snapshot=keep_latest_snapshot)

    async def list_runs(self, *, status: str | None = None) -> list[RunInfo]:
        dialect = self._dialect
        sql = f"SELECT {RUN_COLUMNS} FROM {dialect.table} WHERE last_seq > 0"
        params: dict[str, Any] = {}
        if status is not None:
            sql, params = sql + f" AND status = {dialect.param('status')}", {"status": str(status)}
        (rows,) = await self._select((sql + " ORDER BY updated_at DESC", params))
        return [info_from_row(row) for row in rows]

    async def page_runs(self, query: RunQuery) -> RunsPage:
        dialect = self._dialect
        sql = page_sql(
            query,
            table=dialect.table,
            columns=RUN_COLUMNS,
            param=dialect.param,
            contains=dialect.contains,
            collate=dialect.collate,
            counts_table=dialect.counts_table,
        )
        if sql.rows is None:
            rows, (counted,) = [], await self._select((sql.counts, sql.count_params))
        else:
            rows, counted = await self._select(
                (sql.rows, sql.params), (sql.counts, sql.count_params)
            )
        return page_from_counts(query, [info_from_row(row) for row in rows], counted)

    async def admitted_since(self, workflows: Collection[str], since: datetime) -> frozenset[str]:
        """The runs of ``workflows`` that their queue admitted after ``since``
        (a queue's rate counts them): one query on the index of ``admitted_at``,
        so its cost follows the admissions of the period, not the runs."""
        if not workflows:
            return frozenset()
        dialect = self._dialect
        names = sorted(workflows)
        params: dict[str, Any] = {f"w{i}": name for i, name in enumerate(names)}
        params["since"] = to_us(since)
        listed = ", ".join(dialect.param(f"w{i}") for i in range(len(names)))
        sql = (
            f"SELECT run_id FROM {dialect.table} WHERE admitted_at > {dialect.param('since')} "
            f"AND workflow IN ({listed})"
        )
        (rows,) = await self._select((sql, params))
        return frozenset(row[0] for row in rows)

    async def queue_runs(
        self, queue: str, workflows: Collection[str], now: datetime, limit: int
    ) -> tuple[list[RunInfo], list[RunInfo]]:
        """A queue's admission reads, in one round trip: the queued or running
        runs of ``queue`` (or of ``workflows``) a writer holds a live lease on
        at ``now`` (a range of the lease index: as many as the writers), and
        its ``limit`` best-ranked queued runs nobody holds (the first entries
        of the rank index: priority, then the oldest, then the run id). Both
        cost the same whatever the backlog (SQLite migration 10)."""
        dialect, names = self._dialect, sorted(workflows)
        params: dict[str, Any] = {f"w{i}": name for i, name in enumerate(names)}
        params.update(queue=queue, now=to_us(now), limit=max(limit, 0))
        param = dialect.param
        ours = f"queue = {param('queue')}"
        if names:
            listed = ", ".join(param(f"w{i}") for i in range(len(names)))
            ours = f"({ours} OR workflow IN ({listed}))"
        held = (
            f"SELECT {RUN_COLUMNS} FROM {dialect.using('held_by_lease')} "
            f"WHERE status IN ('queued', 'running') "
            f"AND {sql_lease_live(param('now'))} AND last_seq > 0 AND {ours}"
        )
        waiting = (
            f"SELECT {RUN_COLUMNS} FROM {dialect.using('queued_by_rank')} WHERE status = 'queued' "
            f"AND last_seq > 0 AND {ours} AND ({sql_lease_ended(param('now'))}) "
            f"ORDER BY priority, started_at, run_id{dialect.collate} LIMIT {param('limit')}"
        )
        holders, best = await self._select((held, params), (waiting, params))
        return [info_from_row(row) for row in holders], [info_from_row(row) for row in best]

    async def list_workflows(self) -> list[str]:
        table = self._dialect.table
        (rows,) = await self._select(
            (f"SELECT DISTINCT workflow FROM {table} WHERE last_seq > 0 ORDER BY 1", {})
        )
        return [row[0] for row in rows]
