"""The access token of a UI that a network can reach.

On a loopback address the UI serves this machine only and needs no token.
On any other address a peer on the network could read every run, and with
``--allow-actions`` read the CSRF token off a page and cancel runs; so there
every request (pages, the API, live feeds, actions, static files) must show
a secret that a network peer does not have, as Jupyter does:

* ``agentlog ui`` prints its URL once with ``?token=TOKEN``. Opening it sets
  an ``HttpOnly``, ``SameSite=Strict`` cookie and redirects to the same URL
  without the token, so the token leaves the address bar and the history.
* A script sends ``Authorization: Bearer TOKEN`` instead.
* Anything else is a 401 (no token) or a 403 (a wrong one), and the answer
  says nothing about the runs or the log, nor carries the CSRF token.

Tokens are compared with :func:`hmac.compare_digest`. The cookie holds a
value derived from the token (not the token itself), named after the port,
so two UIs on one host keep their own.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import secrets
from urllib.parse import urlencode

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from agentlog.errors import ConfigError
from agentlog.ui._responses import JSONBody

__all__ = ["MIN_TOKEN_LENGTH", "TOKEN_PARAM", "AccessGate", "check_token", "new_token"]

#: The query parameter that carries the token in the printed URL.
TOKEN_PARAM = "token"

#: The shortest token accepted from ``--token`` (a generated one has 43 characters).
MIN_TOKEN_LENGTH = 16


def new_token() -> str:
    """A random token: 256 bits, URL-safe."""
    return secrets.token_urlsafe(32)


def check_token(token: str) -> str:
    """``token`` if it is fit to guard a UI.

    Raises:
        ConfigError: shorter than :data:`MIN_TOKEN_LENGTH`, or holding spaces
            or control characters (it goes into URLs and headers).
    """
    if len(token) < MIN_TOKEN_LENGTH or not token.isprintable() or " " in token:
        raise ConfigError(
            f"--token: give at least {MIN_TOKEN_LENGTH} printable characters without spaces "
            "(or leave it out: the UI makes a random one)"
        )
    return token


class AccessGate:
    """ASGI middleware: every HTTP request must carry the token (see the module)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()
        derived = hmac.new(self._token, b"agentlog-ui-cookie", hashlib.sha256)
        self._cookie = derived.hexdigest()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        answer = self._answer(request)
        if answer is None:
            await self.app(scope, receive, send)
        else:
            await answer(scope, receive, send)

    def _answer(self, request: Request) -> Response | None:
        """None when the request may pass; else the redirect or the refusal."""
        offered = request.query_params.get(TOKEN_PARAM)
        if offered is not None:
            if not self._matches(offered):
                return _refused(request, 403, "the token in the URL is wrong")
            if request.method in ("GET", "HEAD"):
                return self._enter(request)
            return None
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            if self._matches(credentials.strip()):
                return None
            return _refused(request, 403, "the bearer token is wrong")
        cookie = request.cookies.get(_cookie_name(request), "")
        if hmac.compare_digest(cookie.encode(), self._cookie.encode()):
            return None
        return _refused(request, 401, "this UI needs its access token")

    def _matches(self, offered: str) -> bool:
        return hmac.compare_digest(offered.encode(), self._token)

    def _enter(self, request: Request) -> Response:
        """Set the cookie and send the browser to the same URL without the token."""
        kept = [(k, v) for k, v in request.query_params.multi_items() if k != TOKEN_PARAM]
        clean = URL(path=request.url.path, query=urlencode(kept))
        answer = RedirectResponse(str(clean), status_code=303)
        answer.set_cookie(
            _cookie_name(request),
            self._cookie,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return answer


def _cookie_name(request: Request) -> str:
    port = request.url.port or (443 if request.url.scheme == "https" else 80)
    return f"agentlog_ui_{port}"


def _refused(request: Request, status: int, why: str) -> Response:
    """The refusal: no page shell, so nothing of the runs, the log or the CSRF token."""
    message = (
        f"refused: {why}. Open the URL `agentlog ui` printed when it started (it ends in "
        f"?{TOKEN_PARAM}=...), or send the header Authorization: Bearer TOKEN"
    )
    headers = {"www-authenticate": 'Bearer realm="agentlog ui"'}
    if request.url.path.startswith("/api/"):
        return JSONBody({"error": message, "status": status}, status, headers=headers)
    body = (
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>agentlog: access "
        f"token needed</title></head><body><p id=error-message>{html.escape(message)}</p>"
        "</body></html>"
    )
    return HTMLResponse(body, status, headers=headers)
