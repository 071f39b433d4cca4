"""The UI's responses: JSON bodies, error answers and the HTML page shell.

Every value that goes into HTML passes through :func:`html.escape`; the
pages fill in data with ``textContent`` on the client, never as markup.
"""

from __future__ import annotations

import html
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from agentlog.eventlog.codec import jsonable

__all__ = ["JSONBody", "error_response", "page"]


class JSONBody(Response):
    """A JSON response rendered with orjson (values it cannot carry become text)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, default=lambda value: jsonable(value))


_NAV = (("/", "Runs"), ("/sql", "SQL"))


def page(
    request: Request,
    title: str,
    scripts: tuple[str, ...] = (),
    body: str = "",
    *,
    data: dict[str, str] | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    """A page: the shared header and ``body`` (already escaped markup), then ``scripts``
    (files in ``static/``, after ``common.js``).

    ``data`` becomes ``data-*`` attributes of ``<main>`` (escaped), which is
    how a page's script learns its run id, where the log is, and the CSRF
    token (SQL and the actions need it).
    """
    context = getattr(request.app.state, "ui", None)
    attrs = dict(data or {})
    if context is not None:
        attrs["where"] = context.where
        attrs["actions"] = "1" if context.allow_actions else ""
        # SQL needs it even read-only; only a page of this server can read it.
        attrs["csrf"] = context.csrf_token
    rendered = " ".join(f'data-{k}="{html.escape(v, quote=True)}"' for k, v in attrs.items())
    nav = "".join(f'<a href="{href}">{label}</a>' for href, label in _NAV)
    where = html.escape(context.where) if context is not None else ""
    tags = "".join(f'<script src="/static/{name}"></script>' for name in ("common.js", *scripts))
    text = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{html.escape(title)} · agentlog</title>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        '<link rel=stylesheet href="/static/app.css"></head><body>'
        f"<header><span class=brand>agentlog</span><nav>{nav}</nav><span class=where>{where}"
        f"</span></header><main id=main {rendered}><h1>{html.escape(title)}</h1>{body}</main>"
        f"{tags}</body></html>"
    )
    return HTMLResponse(text, status_code=status_code)


def error_response(request: Request, status_code: int, message: str) -> Response:
    """JSON ``{"error": message}`` for the API, a page saying it for the pages."""
    if request.url.path.startswith("/api/"):
        return JSONBody({"error": message, "status": status_code}, status_code=status_code)
    title = "Not found" if status_code == 404 else "Error"
    body = (
        f'<p class=error id=error-message>{html.escape(message)}</p><p><a href="/">All runs</a></p>'
    )
    return page(request, title, (), body, status_code=status_code)
