"""``/api/runs``: one page of the runs table (hot and archived), the filters'
choices (``/api/workflows``), and ``/api/health``."""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentlog.errors import ConfigError
from agentlog.eventlog.events import RunStatus
from agentlog.ui._context import ui_context
from agentlog.ui._params import int_param
from agentlog.ui._responses import JSONBody

__all__ = ["MAX_LIMIT", "routes"]

#: The most rows one request may ask for: a page, never the whole table.
MAX_LIMIT = 500

_STATUSES = (
    RunStatus.RUNNING,
    RunStatus.QUEUED,
    RunStatus.WAITING,
    RunStatus.COMPLETED,
    RunStatus.FAILED,
    RunStatus.CANCELLED,
    RunStatus.SHREDDED,
)


def _time_param(request: Request, name: str) -> datetime | None:
    raw = request.query_params.get(name)
    if not raw:
        return None
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        raise ConfigError(
            f"{name}={raw!r} is not a time; write it as ISO 8601, e.g. 2026-01-31T12:00"
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


async def runs_api(request: Request) -> Response:
    status = request.query_params.get("status") or None
    if status is not None and status not in _STATUSES:
        raise ConfigError(f"status={status!r} is not one of {', '.join(_STATUSES)}")
    context = ui_context(request)
    async with context.catalog_lock:
        page = await context.catalog.page(
            status=status,
            workflow=request.query_params.get("workflow") or None,
            since=_time_param(request, "since"),
            until=_time_param(request, "until"),
            text=request.query_params.get("text") or None,
            offset=int_param(request, "offset", 0, low=0, high=10**12),
            limit=int_param(request, "limit", 50, low=1, high=MAX_LIMIT),
        )
    return JSONBody(page.to_json())


async def workflows_api(request: Request) -> Response:
    context = ui_context(request)
    async with context.catalog_lock:
        workflows = await context.catalog.workflows()
    return JSONBody({"workflows": workflows, "statuses": list(_STATUSES)})


async def health_api(request: Request) -> Response:
    """The server answers: what it serves, and how many live feeds are open."""
    context = ui_context(request)
    return JSONBody(
        {
            "ok": True,
            "log": context.where,
            "live_feeds": context.live_feeds,
            "sql_running": context.sql_running,
            "actions": context.allow_actions,
        }
    )


routes = [
    Route("/api/runs", runs_api),
    Route("/api/workflows", workflows_api),
    Route("/api/health", health_api),
]
