"""``agentlog ui``: the local web debugger, a presentation layer at the top.

A Starlette app (served by uvicorn) over the event log and the archive:

* :mod:`agentlog.ui._app`: :func:`create_app`, the security headers, the error pages;
* :mod:`agentlog.ui._context`: what the routes share (the open log, archive,
  catalog, runtime and the CSRF secret);
* :mod:`agentlog.ui._pages`: the HTML shells (runs, run, SQL, 404);
* :mod:`agentlog.ui._api_runs`, :mod:`agentlog.ui._api_run`: the JSON endpoints
  the pages fetch, and the run's live feed (server-sent events);
* :mod:`agentlog.ui._api_sql`: read-only SQL over the DuckDB views;
* :mod:`agentlog.ui._actions`: resume, cancel, fork (``--allow-actions`` and a
  CSRF token only), whose JSON bodies :mod:`agentlog.ui._bodies` reads with bounds;
* :mod:`agentlog.ui._access`: the access token a UI on a non-loopback address
  demands of every request;
* :mod:`agentlog.ui._errors`: the UI's own refusals and their HTTP statuses.

The pages are plain HTML, JavaScript and CSS from ``static/``: no build step,
nothing from a CDN, and data is only ever written into the page as text.
"""

from agentlog.ui._app import create_app

__all__ = ["create_app"]
