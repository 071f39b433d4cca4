"""The HTML pages: light shells that render at once and fetch their data.

The run page checks that the run exists first, so an unknown run id is a 404
page, not a blank screen; everything else (the timeline, the events, a
state) is fetched by the page's script from the JSON API.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentlog.ui._context import ui_context
from agentlog.ui._params import run_id_param
from agentlog.ui._responses import page

__all__ = ["routes"]

_RUNS_BODY = """
<form id=filters class=filters>
  <label>status <select name=status id=f-status><option value="">any</option></select></label>
  <label>workflow <select name=workflow id=f-workflow><option value="">any</option></select></label>
  <label>from <input type=datetime-local name=since id=f-since></label>
  <label>to <input type=datetime-local name=until id=f-until></label>
  <label>run id <input type=search name=text id=f-text placeholder="contains..."></label>
  <button type=submit>Filter</button>
</form>
<p id=counts class=counts></p>
<table id=runs class=grid><thead><tr><th>run</th><th>workflow</th><th>status</th><th>steps</th>
<th>events</th><th>started</th><th>updated</th><th>where</th><th>queue</th></tr></thead><tbody></tbody></table>
<p class=pager><button id=prev type=button>&larr; newer</button> <span id=page-info></span>
<button id=next type=button>older &rarr;</button></p>
"""

_RUN_BODY = """
<p id=run-info class=info></p>
<div id=shredded class="notice shredded" hidden></div>
<p id=origin class=info hidden></p>
<p id=parent class=info hidden></p>
<p id=trace class=info hidden></p>
<p id=forks class=info hidden></p>
<section id=pending class=pending hidden></section>
<div id=actions class=actions hidden></div>
<p id=live class=live></p>
<section><h2>Timeline</h2><div id=timeline class=timeline></div></section>
<div class=split>
<section class=events><h2>Events</h2>
<table id=events class=grid><thead><tr><th>seq</th><th>time</th><th>type</th><th>step</th>
<th>payload</th></tr></thead><tbody></tbody></table>
<p class=pager><button id=more type=button>more events</button> <span id=events-info></span></p>
</section>
<section class=inspector><h2 id=inspect-title>State</h2>
<p class=hint id=inspect-hint>Click an event to see the state at its seq and what it changed.</p>
<h3>Changes from the previous seq</h3><div id=diff></div>
<h3>State</h3><pre id=state class=json></pre>
</section>
</div>
"""

_SQL_BODY = """
<form id=sql-form class=sql>
<textarea id=sql-query name=q rows=5 spellcheck=false>
SELECT status, count(*) AS runs FROM runs GROUP BY status ORDER BY runs DESC</textarea>
<p><button type=submit>Run</button> <span class=hint>Read-only: SELECT over the views
<code>events</code>, <code>runs</code>, <code>tasks</code>, <code>interrupts</code>,
<code>checkpoints</code>, <code>checkpoint_writes</code>.</span></p>
</form>
<p id=sql-error class=error hidden></p>
<p id=sql-info class=info></p>
<div id=chart class=chart></div>
<table id=sql-result class=grid><thead></thead><tbody></tbody></table>
"""


async def runs_page(request: Request) -> Response:
    return page(request, "Runs", ("runs.js",), _RUNS_BODY)


async def run_page(request: Request) -> Response:
    run_id = run_id_param(request)
    await ui_context(request).history(run_id)  # an unknown run: UnknownRunError, a 404 page
    scripts = ("timeline.js", "run.js")
    return page(request, f"Run {run_id}", scripts, _RUN_BODY, data={"run": run_id})


async def sql_page(request: Request) -> Response:
    return page(request, "SQL", ("sql.js",), _SQL_BODY)


routes = [
    Route("/", runs_page),
    Route("/runs/{run}", run_page),
    Route("/sql", sql_page),
]
