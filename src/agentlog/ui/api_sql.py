"""``/api/sql?q=``: read-only SQL over the DuckDB views, as columns and rows.

The query runs through :func:`agentlog.archive.open_sql`, the same sandbox as
``agentlog sql``: only SELECT and EXPLAIN, external access off, the
configuration locked. A refused or failing query is a 400 with DuckDB's
reason; nothing is ever written.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentlog.archive import open_sql
from agentlog.errors import ConfigError
from agentlog.eventlog.codec import jsonable
from agentlog.ui.context import ui_context
from agentlog.ui.responses import JSONBody

__all__ = ["MAX_ROWS", "column_kind", "routes"]

#: The most rows the page shows; the rest are counted, not sent.
MAX_ROWS = 1000


def column_kind(kind: pa.DataType) -> str:
    """``time``, ``number`` or ``text``: what the page may chart a column as."""
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        return "time"
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return "number"
    return "text"


def _result(table: pa.Table) -> dict[str, Any]:
    shown = table.slice(0, MAX_ROWS)
    columns = [
        {"name": f.name, "type": str(f.type), "kind": column_kind(f.type)} for f in table.schema
    ]
    rows = [[jsonable(v) for v in row.values()] for row in shown.to_pylist()]
    return {"columns": columns, "rows": rows, "total": table.num_rows, "shown": len(rows)}


async def sql_api(request: Request) -> Response:
    query = (request.query_params.get("q") or "").strip()
    if not query:
        raise ConfigError("no query: pass q=SELECT ... over the views")
    context = ui_context(request)
    with await open_sql(context.store, context.hot, keys=context.keys) as db:
        # DuckDB works synchronously: off the event loop, so live pages keep updating.
        table = await run_in_threadpool(db.arrow, query)
    return JSONBody(_result(table))


routes = [Route("/api/sql", sql_api)]
