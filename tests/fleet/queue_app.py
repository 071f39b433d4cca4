"""The queue fleet test's workflow (``agentlog worker --app tests.fleet.queue_app:workflows``).

``mail`` is in the queue ``emails`` (at most :data:`LIMIT` driven at once);
``paced`` (``--app tests.fleet.queue_app:paced_workflows``) in a queue of at
most :data:`PACE` runs started per :data:`PERIOD`; ``ranked``
(``:ranked_workflows``) in a queue of one at a time, whose runs carry
priorities. Each one step calls an effect that appends an ``enter`` and an ``exit`` line
(the run, the worker's pid, ``time.monotonic()``, one clock for every
process of the machine) to the file named in ``QUEUE_TRACE`` around its
delivery to the dedup service, so the test can tell how many effects were
in flight at once, including those a SIGKILL cut short.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any

from agentlog.runtime import Queue, Rate, StepContext, Workflow, end
from tests.fleet.app import effect

__all__ = ["LIMIT", "PACE", "PERIOD", "paced_workflows", "ranked_workflows", "workflows"]

#: The queue's concurrency limit.
LIMIT = 2
#: How long an effect takes after its delivery (so runs overlap).
EFFECT_S = 0.2

#: The rate queue's limit: at most PACE runs started per PERIOD.
PACE, PERIOD = 3, timedelta(seconds=2)

mail = Workflow("mail", state={"sent": "replace"}, queue=Queue("emails", concurrency=LIMIT))
paced = Workflow("paced", state={"sent": "replace"}, queue=Queue("paced", rate=Rate(PACE, PERIOD)))
ranked = Workflow("ranked", state={"sent": "replace"}, queue=Queue("ranked", concurrency=1))


def _trace(what: str, run: str) -> None:
    line = f"{what} {run} {os.getpid()} {time.monotonic()!r}\n"
    fd = os.open(os.environ["QUEUE_TRACE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())  # one small O_APPEND write: whole lines
    finally:
        os.close(fd)


def traced_effect(run: str, idempotency_key: str) -> str:
    """One delivery, inside an ``enter``/``exit`` pair of trace lines."""
    _trace("enter", run)
    result = effect(run, "mail", run, idempotency_key)
    time.sleep(EFFECT_S)
    _trace("exit", run)
    return result


@mail.step
async def send(ctx: StepContext) -> Any:
    sent = await ctx.task("send", traced_effect, ctx.run_id)
    return end(sent=sent)


@paced.step
async def send_paced(ctx: StepContext) -> Any:
    sent = await ctx.task("send", effect, ctx.run_id, "paced", ctx.run_id)
    return end(sent=sent)


@ranked.step
async def send_ranked(ctx: StepContext) -> Any:
    sent = await ctx.task("send", traced_effect, ctx.run_id)
    return end(sent=sent)


workflows = [mail]
paced_workflows = [paced]
ranked_workflows = [ranked]
