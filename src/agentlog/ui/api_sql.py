"""``/api/sql?q=``: read-only SQL over the DuckDB views, as columns and rows.

The query runs through :func:`agentlog.archive.open_sql`, the same sandbox as
``agentlog sql``: only SELECT and EXPLAIN, external access off, the
configuration locked. A refused or failing query is a 400 with DuckDB's
reason; nothing is ever written.

What one query may cost is bounded (:class:`SqlLimits`): a memory limit and
a thread cap on its DuckDB connection (nothing spills to disk), a time limit
after which it is interrupted (as it is when the client goes away), at most
:data:`MAX_ROWS` rows read from the result and at most
:attr:`SqlLimits.max_result_bytes` bytes in them, and no cell longer than
:data:`MAX_CELL` characters in the answer. At most
:attr:`SqlLimits.max_running` queries run at once; one more is a 429, so
that many queries cannot multiply the memory limit. The endpoint needs the
page's CSRF token (:mod:`agentlog.ui.guard`) even in a read-only UI, so
another site's page cannot make it run queries.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentlog.archive import ArchiveQueryError, open_sql
from agentlog.archive.errors import SqlLimitError
from agentlog.archive.sql import VIEWS, ArchiveSQL, python_rows
from agentlog.errors import ConfigError
from agentlog.eventlog.codec import jsonable
from agentlog.ui.context import ui_context
from agentlog.ui.errors import SqlBusyError
from agentlog.ui.guard import refusal
from agentlog.ui.responses import JSONBody

__all__ = ["MAX_CELL", "MAX_ROWS", "SqlLimits", "column_kind", "routes"]

#: The most rows the page shows; reading stops at the one after.
MAX_ROWS = 1000

#: The most characters of one cell sent (a longer one is cut, and says how long it was).
MAX_CELL = 10_000

#: How often a running query looks whether its client went away.
_CLIENT_POLL_SECONDS = 0.25


@dataclass(frozen=True)
class SqlLimits:
    """What one query of the SQL page may use."""

    timeout: float = 30.0
    """Seconds a query may run before it is interrupted (``agentlog ui --sql-timeout``)."""
    memory_limit: str = "1GB"
    """DuckDB's memory limit for the query's connection."""
    threads: int = 2
    """The most threads one query uses (the UI serves pages meanwhile)."""
    max_result_bytes: int = 64_000_000
    """The most bytes the rows read from one result may hold (``--sql-max-result``):
    the row limit alone lets a few huge values through."""
    max_running: int = 2
    """The most queries running at once (``--sql-max-running``); one more is a 429."""


def column_kind(kind: pa.DataType) -> str:
    """``time``, ``number`` or ``text``: what the page may chart a column as."""
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        return "time"
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return "number"
    return "text"


def _cell(value: Any) -> Any:
    """``value`` ready for JSON, cut to :data:`MAX_CELL` characters if longer."""
    shown = jsonable(value)
    if isinstance(shown, list | dict):
        text = orjson.dumps(shown).decode()
        if len(text) <= MAX_CELL:
            return shown
    elif isinstance(shown, str):
        text = shown
        if len(text) <= MAX_CELL:
            return shown
    else:
        return shown
    return f"{text[:MAX_CELL]}… (cut: {len(text):,} chars in all)"


def _result(table: pa.Table, more: bool) -> dict[str, Any]:
    columns = [
        {"name": f.name, "type": str(f.type), "kind": column_kind(f.type)} for f in table.schema
    ]
    rows = [[_cell(v) for v in row] for row in python_rows(table)]
    return {"columns": columns, "rows": rows, "shown": len(rows), "truncated": more}


async def _run(
    request: Request, db: ArchiveSQL, query: str, limits: SqlLimits
) -> tuple[pa.Table, bool]:
    """The query's first rows, off the event loop (so live pages keep updating);
    interrupted when it runs past its time limit or its client goes away."""
    loop = asyncio.get_running_loop()
    work = asyncio.ensure_future(
        run_in_threadpool(db.head, query, MAX_ROWS, max_bytes=limits.max_result_bytes)
    )
    seconds = limits.timeout
    deadline = loop.time() + seconds
    stopped: ArchiveQueryError | None = None
    try:
        while not work.done():
            left = deadline - loop.time()
            if left <= 0:
                why = (
                    f"the query ran longer than {seconds:g} s, this UI's limit, and was "
                    "stopped; narrow it (a WHERE, a LIMIT) or start the UI with a larger "
                    "--sql-timeout"
                )
                stopped = SqlLimitError(query, "time", why, VIEWS)
                break
            await asyncio.wait({work}, timeout=min(left, _CLIENT_POLL_SECONDS))
            if not work.done() and await request.is_disconnected():
                why = "the query was stopped: its client went away"
                stopped = ArchiveQueryError(query, why, VIEWS)
                break
    finally:
        # The thread must finish before the connection closes; an interrupt that
        # lands before DuckDB starts is lost, so it is sent until the work ends.
        while not work.done():
            db.interrupt()
            await asyncio.wait({work}, timeout=_CLIENT_POLL_SECONDS)
    if stopped is not None:
        if not work.cancelled():
            work.exception()  # retrieved: DuckDB's "Interrupted!" is not the news
        raise stopped
    return work.result()


async def sql_api(request: Request) -> Response:
    context = ui_context(request)
    refused = refusal(request, context, "queries")
    if refused is not None:
        return refused
    query = (request.query_params.get("q") or "").strip()
    if not query:
        raise ConfigError("no query: pass q=SELECT ... over the views")
    limits: SqlLimits = request.app.state.sql_limits
    if context.sql_running >= limits.max_running:
        raise SqlBusyError(query, context.sql_running)
    # Counted from here: building the views reads the hot log, and costs memory too.
    context.sql_running += 1
    try:
        db = await open_sql(
            context.store,
            context.hot,
            keys=context.keys,
            memory_limit=limits.memory_limit,
            threads=limits.threads,
        )
        with db:
            table, more = await _run(request, db, query, limits)
    finally:
        context.sql_running -= 1
    return JSONBody(_result(table, more))


routes = [Route("/api/sql", sql_api)]
