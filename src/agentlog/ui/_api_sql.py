"""``/api/sql?q=``: read-only SQL over the DuckDB views, as columns and rows.

The query runs in a query process of its own (:mod:`agentlog.archive._sql_process`,
kept ready between queries), in the same sandbox as ``agentlog sql``: one
SELECT or EXPLAIN, external access off, the configuration locked. A refused
or failing query is a 400 with DuckDB's reason; nothing is ever written.

What one query may cost is bounded (:class:`SqlLimits`): a memory limit and
a thread cap on its DuckDB connection (nothing spills to disk) and a hard
bound on its whole process's memory derived from that limit, a time limit
after which its process is killed (as it is when the client goes away), at most
:data:`MAX_ROWS` rows read from the result and at most
:attr:`SqlLimits.max_result_bytes` bytes in them, and no cell longer than
:data:`MAX_CELL` characters in the answer. At most
:attr:`SqlLimits.max_running` queries run at once; one more is a 429, so
that many queries cannot multiply the memory limit. The endpoint needs the
page's CSRF token (:mod:`agentlog.ui._guard`) even in a read-only UI, so
another site's page cannot make it run queries.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, TypeAlias

import orjson
import pyarrow as pa
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentlog.archive import ArchiveQueryError
from agentlog.archive._errors import SqlLimitError
from agentlog.archive._sql import VIEWS, SqlSource, python_rows, sql_cipher, sql_source
from agentlog.archive._sql_process import QueryProcess, QueryProcesses
from agentlog.crypto import PayloadCipher
from agentlog.errors import ConfigError
from agentlog.eventlog.codec import jsonable
from agentlog.ui._context import ui_context
from agentlog.ui._errors import SqlBusyError
from agentlog.ui._guard import refusal
from agentlog.ui._responses import JSONBody

__all__ = ["MAX_CELL", "MAX_ROWS", "SqlLimits", "column_kind", "routes"]

#: The most rows the page shows; reading stops at the one after.
MAX_ROWS = 1000

#: The most characters of one cell sent (a longer one is cut, and says how long it was).
MAX_CELL = 10_000

#: How often a running query looks whether its client went away.
_CLIENT_POLL_SECONDS = 0.25

#: What a query reads (gathered here, where the hot log is open), and the keys.
_Plan: TypeAlias = tuple[SqlSource, PayloadCipher | None]


@dataclass(frozen=True)
class SqlLimits:
    """What one query of the SQL page may use."""

    timeout: float = 30.0
    """Seconds a query may run before it is interrupted (``agentlog ui --sql-timeout``)."""
    memory_limit: str = "1GB"
    """DuckDB's memory limit for the query's connection; its query process may hold
    this plus a fixed overhead (:func:`agentlog.archive._sql_worker.query_bound`)."""
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
    request: Request, process: QueryProcess, plan: _Plan, query: str, limits: SqlLimits
) -> tuple[pa.Table, bool]:
    """The query's first rows, from its query process (so live pages keep updating);
    the process is killed when the query runs past its time limit or its client
    goes away. The time counts from when the query starts, once its process
    has loaded and built the views."""
    source, cipher = plan
    work = asyncio.ensure_future(
        run_in_threadpool(
            process.run,
            source,
            cipher,
            query,
            memory_limit=limits.memory_limit,
            threads=limits.threads,
            limit=MAX_ROWS,
            max_bytes=limits.max_result_bytes,
        )
    )
    seconds = limits.timeout
    stopped: ArchiveQueryError | None = None
    try:
        while not work.done():
            started = process.started_at
            if started is not None and time.monotonic() - started >= seconds:
                why = (
                    f"the query ran longer than {seconds:g} s, this UI's limit, and was "
                    "stopped; narrow it (a WHERE, a LIMIT) or start the UI with a larger "
                    "--sql-timeout"
                )
                stopped = SqlLimitError(query, "time", why, VIEWS)
                break
            left = seconds if started is None else started + seconds - time.monotonic()
            await asyncio.wait({work}, timeout=max(0.0, min(left, _CLIENT_POLL_SECONDS)))
            if not work.done() and await request.is_disconnected():
                why = "the query was stopped: its client went away"
                stopped = ArchiveQueryError(query, why, VIEWS)
                break
    finally:
        if not work.done():
            process.kill()  # its thread returns as soon as the socket closes
            await asyncio.wait({work})
    if stopped is not None:
        if not work.cancelled():
            work.exception()  # retrieved: "the query was stopped" is not the news
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
    # Counted from here: gathering the hot events reads the hot log, and costs memory too.
    context.sql_running += 1
    try:
        source = await sql_source(context.store, context.log)
        plan = (source, sql_cipher(context.keys, context.log))
        processes: QueryProcesses = request.app.state.sql_processes
        process = await run_in_threadpool(processes.take)
        try:
            table, more = await _run(request, process, plan, query, limits)
        finally:
            await run_in_threadpool(processes.give_back, process)
    finally:
        context.sql_running -= 1
    return JSONBody(_result(table, more))


routes = [Route("/api/sql", sql_api)]
