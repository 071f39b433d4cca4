"""One run's JSON endpoints and its live feed.

* ``/api/runs/{id}/events?after=&limit=``: a page of events (never all of them);
* ``/api/runs/{id}/state/{seq}``: the state at that seq and the diff from the one before;
* ``/api/runs/{id}/timeline?first_step=``: steps, lanes (parallel branches), bars and
  marks, a window of supersteps at a time;
* ``/api/runs/{id}/live?after=``: server-sent events, one per recorded event,
  from :meth:`EventReader.tail` (as ``agentlog show --follow`` follows a run);
  the page fetches the new events and the timeline when told;
* ``/api/runs/{id}/origin``: the run it was forked from (``Runtime.fork``), if any;
* ``/api/runs/{id}/forks``: the runs forked from it (:func:`agentlog.replay._forks.forks_of`);
* ``/api/runs/{id}/pending``: the questions a waiting run asks, each with the
  shape its answer must have (``expects``);
* ``/api/runs/{id}``: the run's index row, where it lives (hot or archive),
  and for a shredded run when and by whom (``shredded``).

``{id}`` is the run id as :func:`agentlog.ui._params.encode_run_id` writes it
(one path segment whatever the id holds: ``/``, ``.``, ``..``); every number
is read by :func:`agentlog.ui._params.whole_number`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from agentlog.errors import ConfigError
from agentlog.eventlog.events import RunStatus
from agentlog.replay._forks import forks_of
from agentlog.ui._api_runs import MAX_LIMIT
from agentlog.ui._context import ui_context
from agentlog.ui._params import int_param, run_id_param, whole_number
from agentlog.ui._responses import JSONBody

__all__ = ["LIVE_POLL_SECONDS", "TIMELINE_STEPS", "routes"]

#: The most steps the timeline endpoint ships: the run's latest ones (where a
#: live run moves), or a window from ``?first_step=``; ``counts.steps`` says
#: how many there are. A long run's page stays small, as its events are paged.
TIMELINE_STEPS = 300

#: How often the live feed looks for events another process recorded (a
#: backend with change notification wakes sooner): well within a second.
LIVE_POLL_SECONDS = 0.2


async def info_api(request: Request) -> Response:
    history = await ui_context(request).history(run_id_param(request))
    info = await history.refresh()
    return JSONBody(
        {
            "run_id": history.run_id,
            "where": history.where,
            "info": info.to_json(),
            "last_seq": info.last_seq,
            "shredded": await history.shredded(),
            "parent": await history.parent(),
            "trace_url": trace_link(ui_context(request).trace_url, await history.trace_id()),
        }
    )


def check_trace_url(template: str | None) -> str | None:
    """``template`` if it is an http(s) URL with ``{trace_id}`` in it.

    Raises:
        ConfigError: it is not.
    """
    if template is None:
        return None
    if "{trace_id}" not in template or not template.startswith(("http://", "https://")):
        raise ConfigError(
            f"trace URL {template!r}: give the trace viewer's http(s) URL with {{trace_id}} "
            "in it, e.g. http://localhost:16686/trace/{trace_id} (Jaeger)"
        )
    return template


def trace_link(template: str | None, trace_id: str | None) -> str | None:
    """The trace viewer's page of the run's trace (``agentlog ui --trace-url``),
    or None without a viewer or a trace."""
    if template is None or trace_id is None:
        return None
    return template.replace("{trace_id}", trace_id)


async def pending_api(request: Request) -> Response:
    """``{"interrupts": [{"id", "step", "payload", "expects", "due_at"}]}``:
    what a waiting run asks, and the shape each answer must have."""
    history = await ui_context(request).history(run_id_param(request))
    return JSONBody({"interrupts": await history.pending()})


async def forks_api(request: Request) -> Response:
    """``{"forks": [{"run_id", "seq", "status"}], "complete": bool}``."""
    context = ui_context(request)
    history = await context.history(run_id_param(request))
    async with context.catalog_lock:
        forks = await forks_of(context.catalog, context.reader, await history.refresh())
    return JSONBody(forks.to_json())


async def events_api(request: Request) -> Response:
    history = await ui_context(request).history(run_id_param(request))
    after = int_param(request, "after", 0, low=0, high=10**12)
    limit = int_param(request, "limit", 200, low=1, high=MAX_LIMIT)
    events = await history.events(after=after, limit=limit)
    return JSONBody({"events": events, "last_seq": history.last_seq})


async def state_api(request: Request) -> Response:
    run_id = run_id_param(request)
    history = await ui_context(request).history(run_id)
    # Range-checked by the history: a seq past the run's end names its last seq.
    seq = whole_number("seq", request.path_params["seq"], low=0, high=10**12)
    return JSONBody(
        {"seq": seq, "state": await history.state_at(seq), "diff": await history.diff_at(seq)}
    )


async def origin_api(request: Request) -> Response:
    """Where a forked run came from: ``{"forked_from": {"run_id", "seq"} or None}``."""
    return JSONBody({"forked_from": await ui_context(request).origin(run_id_param(request))})


async def timeline_api(request: Request) -> Response:
    raw = request.query_params.get("first_step")
    first = None if not raw else int_param(request, "first_step", 0, low=0, high=10**12)
    timeline = await ui_context(request).timeline(run_id_param(request), first, TIMELINE_STEPS)
    return JSONBody(timeline)


def _sse(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {orjson.dumps(data).decode()}\n\n"


async def live_api(request: Request) -> Response:
    """Tell the page about every event recorded after ``after``, until the run ends."""
    context = ui_context(request)
    run_id = run_id_param(request)
    info = await (await context.history(run_id)).refresh()
    after = int_param(request, "after", 0, low=0, high=10**12)
    done = info.status in RunStatus.TERMINAL and after >= info.last_seq

    async def feed() -> AsyncIterator[str]:
        context.live_feeds += 1
        try:
            yield "retry: 1000\n\n"
            if not done:
                # tail ends by itself after the run's terminal event; a closed tab
                # cancels this generator (Starlette listens for the disconnect).
                async for event in context.reader.tail(
                    run_id, after_seq=after, poll_seconds=LIVE_POLL_SECONDS
                ):
                    yield _sse("seq", {"seq": event.seq, "type": event.type})
            yield _sse("end", {})
        finally:
            context.live_feeds -= 1

    return StreamingResponse(
        feed(),
        media_type="text/event-stream",
        headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
    )


routes = [
    Route("/api/runs/{run}/events", events_api),
    Route("/api/runs/{run}/state/{seq}", state_api),
    Route("/api/runs/{run}/timeline", timeline_api),
    Route("/api/runs/{run}/live", live_api),
    Route("/api/runs/{run}/origin", origin_api),
    Route("/api/runs/{run}/forks", forks_api),
    Route("/api/runs/{run}/pending", pending_api),
    Route("/api/runs/{run}", info_api),
]
