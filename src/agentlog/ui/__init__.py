"""``agentlog ui``: the local web debugger, a presentation layer at the top.

A Starlette app (served by uvicorn) over the event log and the archive:

* :mod:`agentlog.ui.app`: :func:`create_app`, the security headers, the error pages;
* :mod:`agentlog.ui.context`: what the routes share (the open log, archive,
  catalog, runtime and the CSRF secret);
* :mod:`agentlog.ui.pages`: the HTML shells (runs, run, SQL, 404);
* :mod:`agentlog.ui.api_runs`, :mod:`agentlog.ui.api_run`: the JSON endpoints
  the pages fetch, and the run's live feed (server-sent events);
* :mod:`agentlog.ui.api_sql`: read-only SQL over the DuckDB views;
* :mod:`agentlog.ui.actions`: resume, cancel, fork (``--allow-actions`` and a
  CSRF token only), whose JSON bodies :mod:`agentlog.ui.bodies` reads with bounds;
* :mod:`agentlog.ui.access`: the access token a UI on a non-loopback address
  demands of every request;
* :mod:`agentlog.ui.errors`: the UI's own refusals and their HTTP statuses.

The pages are plain HTML, JavaScript and CSS from ``static/``: no build step,
nothing from a CDN, and data is only ever written into the page as text.
"""

from agentlog.ui.app import create_app

__all__ = ["create_app"]
