"""The write endpoints: resume a waiting run, cancel a run, fork a run.

A resume body is ``{"value": ANSWER}`` (the one open interrupt) or
``{"answers": {ID: ANSWER}}`` (by interrupt id); ``Runtime.resume`` checks
each answer against what its interrupt expects.

Each is a POST and is served only when the UI was started with
``--allow-actions``; otherwise it answers 403 and the pages show no buttons.
With actions, a request must pass :func:`agentlog.ui._guard.refusal`: the
CSRF token in ``X-CSRF-Token``, and no other site's ``Origin``. Its JSON body
is read with bounds on its size and nesting (:mod:`agentlog.ui._bodies`).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentlog.errors import ConfigError
from agentlog.runtime import Runtime
from agentlog.ui._bodies import json_object
from agentlog.ui._context import UiContext, ui_context
from agentlog.ui._guard import CSRF_HEADER, refusal
from agentlog.ui._params import run_id_param
from agentlog.ui._responses import JSONBody, error_response

__all__ = ["CSRF_HEADER", "routes"]


def _refusal(request: Request, context: UiContext) -> Response | None:
    """A 403 for an action that must not run, or None when it may."""
    if not context.allow_actions or context.runtime is None:
        return error_response(
            request,
            403,
            "actions are off: this UI is read-only; start it with `agentlog ui "
            "--allow-actions` to resume, cancel or fork runs",
        )
    return refusal(request, context, "actions")


async def _act(request: Request) -> tuple[Runtime, str, dict[str, Any]] | Response:
    context = ui_context(request)
    refused = _refusal(request, context)
    if refused is not None:
        return refused
    assert context.runtime is not None
    return context.runtime, run_id_param(request), await json_object(request)


async def resume_api(request: Request) -> Response:
    acted = await _act(request)
    if isinstance(acted, Response):
        return acted
    runtime, run_id, body = acted
    answers = body.get("answers")
    if answers is not None and not isinstance(answers, dict):
        raise ConfigError(
            'answers must be a JSON object of interrupt ids to answers: {"answers": {"ID": ...}} '
            "(the ids are in /api/runs/RUN/pending)"
        )
    await runtime.resume(run_id, body.get("value"), answers=answers)
    return JSONBody({"run_id": run_id, "resumed": True})


async def cancel_api(request: Request) -> Response:
    acted = await _act(request)
    if isinstance(acted, Response):
        return acted
    runtime, run_id, body = acted
    state = await runtime.cancel(run_id, str(body.get("reason") or "cancelled from the UI"))
    return JSONBody({"run_id": run_id, "status": state.status})


async def fork_api(request: Request) -> Response:
    acted = await _act(request)
    if isinstance(acted, Response):
        return acted
    runtime, run_id, body = acted
    at_seq, new_run_id, updates = body.get("at_seq"), body.get("new_run_id"), body.get("updates")
    if not isinstance(at_seq, int) or not isinstance(new_run_id, str) or not new_run_id:
        raise ConfigError('a fork needs {"at_seq": SEQ, "new_run_id": "NEW", "updates": {...}}')
    if updates is not None and not isinstance(updates, dict):
        raise ConfigError("updates must be a JSON object of state keys to new values")
    await runtime.fork(
        run_id,
        at_seq,
        new_run_id=new_run_id,
        updates=updates,
        archive=ui_context(request).store,
    )
    return JSONBody({"run_id": new_run_id, "forked_from": run_id, "at_seq": at_seq})


routes = [
    Route("/api/runs/{run}/resume", resume_api, methods=["POST"]),
    Route("/api/runs/{run}/cancel", cancel_api, methods=["POST"]),
    Route("/api/runs/{run}/fork", fork_api, methods=["POST"]),
]
