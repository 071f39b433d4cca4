"""The Starlette app: routes, security headers, and the one error boundary.

Every response carries a strict Content-Security-Policy (scripts and styles
from this server only, nothing inline, no frames), ``nosniff`` and no
referrer. A UI that answers non-loopback host names also demands its access
token of every request (:mod:`agentlog.ui._access`). Errors are typed
(:mod:`agentlog.errors`): an API call gets JSON ``{"error": ...}`` with a 4xx
status, a page gets the same message as text.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentlog._logging import get_logger
from agentlog.archive._sql_process import QueryProcesses
from agentlog.crypto import KeyStore
from agentlog.errors import (
    AgentlogError,
    ConfigError,
    RunExistsError,
    RunNotWaitingError,
    UnknownRunError,
)
from agentlog.runtime import Workflow
from agentlog.ui import _actions as actions
from agentlog.ui import _api_run as api_run
from agentlog.ui import _api_runs as api_runs
from agentlog.ui import _api_sql as api_sql
from agentlog.ui import _pages as pages
from agentlog.ui._access import AccessGate, check_token
from agentlog.ui._api_run import check_trace_url
from agentlog.ui._api_sql import SqlLimits
from agentlog.ui._context import open_context
from agentlog.ui._errors import RequestBodyError, SqlBusyError
from agentlog.ui._responses import error_response

__all__ = [
    "LOOPBACK_HOSTS",
    "SECURITY_HEADERS",
    "SqlLimits",
    "create_app",
    "is_loopback",
    "served_hosts",
]

#: The Host names a UI on this machine answers to. Any other name is refused,
#: so a web page whose DNS name is re-pointed at 127.0.0.1 (DNS rebinding)
#: cannot read the runs.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is this machine only: 127.0.0.0/8, ::1."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def served_hosts(host: str, public_hosts: Sequence[str] = ()) -> list[str]:
    """The Host header names a UI listening on ``host`` answers to.

    Always this machine's loopback names; the listening address itself when
    it is one a client can name (not ``0.0.0.0`` or ``::``); and the names
    in ``public_hosts`` (``--public-host``). Never any name: a web page whose
    DNS name is re-pointed at this server (DNS rebinding) is refused.

    Raises:
        ConfigError: a non-loopback ``host`` that leaves no name to reach it by
            (``0.0.0.0`` without ``--public-host``), or a wildcard name.
    """
    names = list(LOOPBACK_HOSTS)
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        address = None
    if address is None or not address.is_unspecified:
        names.append(host)
        if address is not None and address.version == 6:
            names.append(f"[{address}]")
    for name in public_hosts:
        # "host:port" has one colon; an IPv6 address has more.
        if not name or any(c in name for c in "*/ ") or name.count(":") == 1:
            raise ConfigError(
                f"--public-host {name!r}: give a host name or address clients use "
                "(e.g. myhost.lan or 192.168.1.5), without a port or wildcard"
            )
        names.append(name)
    if not is_loopback(host) and len(set(names)) == len(set(LOOPBACK_HOSTS)):
        raise ConfigError(
            f"--host {host} listens on every address, and no host name was given to reach it "
            "by: pass the names clients use with --public-host NAME (repeatable)"
        )
    return list(dict.fromkeys(names))


STATIC = Path(__file__).parent / "static"

_log = get_logger(__name__)

#: Sent with every response. No inline script or style can run, whatever an
#: event's payload holds; the pages only load what this server serves.
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}


class _SecurityHeaders:
    """Adds :data:`SECURITY_HEADERS` to every HTTP response (streams included),
    and is the last error boundary: an unexpected exception becomes a 500
    that carries them too, with no traceback.

    Starlette's own ``ServerErrorMiddleware`` sits outside every user
    middleware, so its 500 would go out without these headers.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers", []))
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, with_headers)
        except Exception:
            if started:  # a stream broke midway: nothing more can be said to the client
                raise
            _log.exception("ui request failed", path=scope.get("path", ""))
            answer = error_response(
                Request(scope),
                500,
                "internal error: the server failed on this request (its log has the details); "
                "please report it",
            )
            await answer(scope, receive, with_headers)


def _status_of(exc: AgentlogError) -> int:
    if isinstance(exc, SqlBusyError | RequestBodyError):
        return exc.status  # 429 for a query past the cap, 413 or 400 for a body
    if isinstance(exc, UnknownRunError):
        return 404
    if isinstance(exc, RunNotWaitingError | RunExistsError):
        return 409
    return 400  # bad input: a seq out of range, a refused query, a bad option


async def _agentlog_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, AgentlogError)
    return error_response(request, _status_of(exc), str(exc))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(request, exc.status_code, str(exc.detail))


def create_app(
    log_url: str,
    archive_url: str,
    *,
    allow_actions: bool = False,
    keys: KeyStore | None = None,
    workflows: Iterable[Workflow[Any, Any]] = (),
    allowed_hosts: Sequence[str] = LOOPBACK_HOSTS,
    sql_limits: SqlLimits | None = None,
    access_token: str | None = None,
    trace_url: str | None = None,
) -> Starlette:
    """The web debugger over the log at ``log_url`` and the archive at ``archive_url``.

    Args:
        log_url: the hot log; it must exist (the UI never creates one).
        archive_url: the archive (``file://DIR`` or ``s3://...``); a local
            folder that does not exist means no archive.
        allow_actions: serve resume, cancel and fork (each behind the CSRF
            token); otherwise every write endpoint answers 403.
        keys: opens encrypted payloads (None: sealed content shows as metadata).
        workflows: the workflows an action may need to run (resume, fork).
        allowed_hosts: the Host header names served (:func:`served_hosts`);
            others get 400, and a browser's Origin must be one of them.
        sql_limits: what one query of the SQL page may use (None: the defaults).
        access_token: the secret every request must carry (:mod:`agentlog.ui._access`);
            required when ``allowed_hosts`` names a host other than this machine.
        trace_url: a trace viewer's URL with ``{trace_id}`` in it (Jaeger:
            ``http://jaeger:16686/trace/{trace_id}``): a traced run's page
            links to its OpenTelemetry trace there.

    Raises:
        ConfigError: a wildcard host name, a non-loopback host name without an
            ``access_token``, a token too short to guard anything, or a
            ``trace_url`` that is not an http(s) URL with ``{trace_id}`` in it.
    """
    chosen = list(workflows)
    check_trace_url(trace_url)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with open_context(
            log_url, archive_url, allow_actions=allow_actions, keys=keys, workflows=chosen
        ) as context:
            context.trace_url = trace_url
            app.state.ui = context
            with QueryProcesses() as processes:  # the SQL page's query processes
                app.state.sql_processes = processes
                yield

    routes = [
        *pages.routes,
        *api_runs.routes,
        *api_run.routes,
        *api_sql.routes,
        *actions.routes,
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    if any("*" in name for name in allowed_hosts):
        raise ConfigError("allowed_hosts: name each host served; a wildcard lets DNS rebinding in")
    middleware = [
        Middleware(_SecurityHeaders),
        Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)),
    ]
    if access_token is not None:
        middleware.append(Middleware(AccessGate, token=check_token(access_token)))
    elif not all(is_loopback(name) for name in allowed_hosts):
        raise ConfigError(
            "a UI that answers host names other than this machine's needs an access token: "
            "pass access_token= (`agentlog ui` makes one and prints it in the URL)"
        )
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=middleware,
        exception_handlers={AgentlogError: _agentlog_error, HTTPException: _http_error},
    )
    app.state.allowed_hosts = list(allowed_hosts)
    app.state.sql_limits = sql_limits or SqlLimits()
    return app
