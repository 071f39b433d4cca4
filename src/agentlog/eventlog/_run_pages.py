"""One page of the run index: the query, the answer, and the rule written once.

A run list of 100,000 runs is never loaded whole to show 50 of them:
:meth:`~agentlog.eventlog._reader.EventReader.page_runs` takes a
:class:`RunQuery` (filters, an order, an offset and a limit) and answers a
:class:`RunsPage` (the page's rows, how many runs match, and how many in each
status). The order is fixed and total: the most recently updated first, then
by run id, so that a page boundary never depends on the storage.

The rule is here once, twice over: :func:`page_in_memory` for a backend that
holds its index in memory (and the default over ``list_runs``), and
:func:`page_sql` that generates the same query as SQL for a backend with a
run index table (SQLite, PostgreSQL), in the ``updated_at`` microseconds
those tables store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agentlog.errors import ConfigError
from agentlog.eventlog._records import RunInfo
from agentlog.eventlog._row_format import epoch_us

__all__ = [
    "PageSql",
    "RunQuery",
    "RunsPage",
    "order_key",
    "page_from_counts",
    "page_in_memory",
    "page_sql",
]


def _us(moment: datetime | None) -> int:
    """Microseconds since the Unix epoch (0 for no time: such runs sort last)."""
    if moment is None:
        return 0
    if moment.tzinfo is None:
        raise ConfigError(f"a run query's time must have a time zone (UTC); got {moment!r}")
    return epoch_us(moment)


def order_key(updated_at: datetime | None, run_id: str) -> tuple[int, str]:
    """The run list's sort key: newest update first, then run id (ascending)."""
    return (-_us(updated_at), run_id)


@dataclass(frozen=True, slots=True)
class RunQuery:
    """Which runs, in the run list's order, and which slice of them."""

    status: str | None = None
    """Only runs in this status (``total`` counts these; ``counts`` does not filter by it)."""
    workflow: str | None = None
    """Only runs of this workflow."""
    since: datetime | None = None
    """Only runs last updated at or after this time (UTC)."""
    until: datetime | None = None
    """Only runs last updated before this time (UTC)."""
    text: str | None = None
    """Only runs whose id contains this text (case-sensitive substring)."""
    run_ids: tuple[str, ...] | None = None
    """Only these runs (at most a few hundred: they become one ``IN`` list)."""
    before: tuple[datetime | None, str] | None = None
    """Only runs ordered ahead of a run updated at ``before[0]`` with id
    ``before[1]``: how many there are is a run's rank in the list."""
    offset: int = 0
    limit: int = 50
    """How many rows to return; 0 returns the counts only."""

    def __post_init__(self) -> None:
        if self.offset < 0 or self.limit < 0:
            raise ConfigError(
                f"a run page needs offset >= 0 and limit >= 0; got offset {self.offset}, "
                f"limit {self.limit}"
            )


@dataclass(frozen=True, slots=True)
class RunsPage:
    """The rows of one page and what the whole filtered list holds."""

    rows: list[RunInfo]
    total: int
    """Runs that match every filter (the status one included)."""
    counts: dict[str, int] = field(default_factory=dict)
    """Runs per status that match every filter but the status one, so that a
    status tab can show what choosing it would list."""


def _matches(info: RunInfo, query: RunQuery) -> bool:
    """Every filter of ``query`` but the status one."""
    if not info.last_seq:
        return False
    if query.workflow is not None and info.workflow != query.workflow:
        return False
    updated = _us(info.updated_at)
    if query.since is not None and updated < _us(query.since):
        return False
    if query.until is not None and updated >= _us(query.until):
        return False
    if query.text and query.text not in info.run_id:
        return False
    if query.run_ids is not None and info.run_id not in query.run_ids:
        return False
    return query.before is None or order_key(info.updated_at, info.run_id) < order_key(
        *query.before
    )


def page_in_memory(rows: Iterable[RunInfo], query: RunQuery) -> RunsPage:
    """:class:`RunsPage` of ``rows`` (any order) by :class:`RunQuery`, in Python."""
    counts: dict[str, int] = {}
    chosen = []
    for info in rows:
        if _matches(info, query):
            counts[info.status] = counts.get(info.status, 0) + 1
            if query.status is None or info.status == query.status:
                chosen.append(info)
    chosen.sort(key=lambda info: order_key(info.updated_at, info.run_id))
    page = chosen[query.offset : query.offset + query.limit] if query.limit else []
    return RunsPage(page, len(chosen), counts)


@dataclass(frozen=True, slots=True)
class PageSql:
    """The two statements of a page query and their parameters."""

    rows: str | None
    """Selects the page's rows (the caller's columns), or None when limit is 0."""
    counts: str
    """Selects ``status, count(*)`` grouped by status."""
    params: dict[str, Any]
    """The rows statement's parameters."""
    count_params: dict[str, Any]
    """The counts statement's (some drivers refuse a parameter a statement lacks)."""


def page_sql(
    query: RunQuery,
    *,
    table: str,
    columns: str,
    param: Callable[[str], str],
    contains: str,
    collate: str = "",
    counts_table: str | None = None,
) -> PageSql:
    """The SQL of :func:`page_in_memory`'s rule, over a run index table.

    Args:
        table: the run index table (``runs``, ``agentlog_runs``).
        columns: what the rows statement selects.
        param: a named placeholder in the driver's style (``:x``, ``%(x)s``).
        contains: ``{col}`` contains ``{arg}``, as a SQL template
            (``instr({col}, {arg}) > 0``), since neither LIKE escapes alike.
        collate: what makes run ids compare by code point, as Python does
            (PostgreSQL: `` COLLATE "C"``; SQLite compares bytes already).
        counts_table: a table of ``(status, n)``, the listed runs per status,
            kept with the index (SQLite's ``run_counts``): an unfiltered
            page reads its counts there instead of counting every run.
    """
    where = ["last_seq > 0"]
    params: dict[str, Any] = {}

    def bind(name: str, value: Any) -> str:
        params[name] = value
        return param(name)

    if query.workflow is not None:
        where.append(f"workflow = {bind('workflow', query.workflow)}")
    if query.since is not None:
        where.append(f"updated_at >= {bind('since', _us(query.since))}")
    if query.until is not None:
        where.append(f"updated_at < {bind('until', _us(query.until))}")
    if query.text:
        where.append(contains.format(col="run_id", arg=bind("text", query.text)))
    if query.run_ids is not None:
        ids = [bind(f"id{i}", run_id) for i, run_id in enumerate(query.run_ids)]
        where.append(f"run_id IN ({', '.join(ids)})" if ids else "0 = 1")
    if query.before is not None:
        at = bind("before_at", _us(query.before[0]))
        run_id = bind("before_id", query.before[1])
        where.append(
            f"(updated_at > {at} OR (updated_at = {at} AND run_id{collate} < {run_id}{collate}))"
        )
    if counts_table is not None and len(where) == 1:
        counts = f"SELECT status, n FROM {counts_table} WHERE n > 0"
    else:
        counts = f"SELECT status, count(*) FROM {table} WHERE {' AND '.join(where)} GROUP BY status"
    count_params = dict(params)
    rows = None
    if query.limit:
        if query.status is not None:
            where.append(f"status = {bind('status', str(query.status))}")
        order = f"ORDER BY updated_at DESC, run_id{collate}"
        # The page's ids first (an index walk that skips `offset` runs without
        # reading their rows), then only those rows.
        page_ids = (
            f"SELECT run_id FROM {table} WHERE {' AND '.join(where)} {order} "
            f"LIMIT {bind('limit', query.limit)} OFFSET {bind('offset', query.offset)}"
        )
        rows = f"SELECT {columns} FROM {table} WHERE run_id IN ({page_ids}) {order}"
    return PageSql(rows, counts, params, count_params)


def page_from_counts(
    query: RunQuery, rows: list[RunInfo], counted: Iterable[tuple[str, int]]
) -> RunsPage:
    """A :class:`RunsPage` from the page's rows and the ``status, count`` rows."""
    counts = {str(status): int(n) for status, n in counted}
    total = counts.get(query.status, 0) if query.status is not None else sum(counts.values())
    return RunsPage(rows, total, counts)
