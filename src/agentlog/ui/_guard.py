"""Who may call the UI's sensitive endpoints: the actions and SQL.

A request must carry the per-process CSRF token (every page holds it in
``data-csrf`` and sends it in the ``X-CSRF-Token`` header), and a browser's
``Origin``, when sent, must be this server under one of the Host names it
serves. Another site's page can neither read the token nor send the header
without a CORS preflight, which this server never grants; so an
``<img src=http://127.0.0.1:8765/api/sql?q=...>`` on any web page is refused.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from agentlog.ui._context import UiContext
from agentlog.ui._responses import error_response

__all__ = ["CSRF_HEADER", "refusal"]

CSRF_HEADER = "x-csrf-token"


def refusal(request: Request, context: UiContext, what: str) -> Response | None:
    """A 403 when ``request`` lacks the token or comes from another site, else None.

    Args:
        request: the request.
        context: holds the token.
        what: what is refused, for the message ("actions", "SQL").
    """
    sent = request.headers.get(CSRF_HEADER, "")
    if not hmac.compare_digest(sent.encode(), context.csrf_token.encode()):
        why = "no CSRF token" if not sent else "a wrong CSRF token"
        return error_response(
            request,
            403,
            f"refused: the request carries {why}; send {what} from the UI's page "
            f"(a script: read data-csrf from a page and send it in X-CSRF-Token)",
        )
    origin = request.headers.get("origin")
    if origin is not None and not _same_site(request, origin):
        return error_response(request, 403, f"refused: a request from another site ({origin})")
    return None


def _same_site(request: Request, origin: str) -> bool:
    """``origin`` is this server: its scheme and address, under a served Host name."""
    if origin != f"{request.url.scheme}://{request.url.netloc}":
        return False
    served: Sequence[str] = request.app.state.allowed_hosts
    return (urlsplit(origin).hostname or "") in {h.strip("[]").lower() for h in served}
