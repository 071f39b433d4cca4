"""A workflow that exercises every part of the timeline, for the replay tests.

``fan`` fans out to two branches; ``fetch`` runs two tasks at the same time,
one of which fails once and then succeeds (a retry); ``ask`` waits for a
human; ``finish`` ends the run once the answer arrives.
"""

from __future__ import annotations

import asyncio

from agentlog.runtime import RetryPolicy, StepContext, Workflow, end, goto, task
from agentlog.runtime.workflow import Next

#: How many times ``flaky`` was called in this process (it fails the first time).
CALLS = {"flaky": 0}


@task
async def slow(name: str) -> str:
    await asyncio.sleep(0.01)
    return f"slow {name}"


@task(retry=RetryPolicy(max_attempts=3, initial_interval=0.001))
async def flaky(name: str) -> str:
    CALLS["flaky"] += 1
    await asyncio.sleep(0.005)
    if CALLS["flaky"] == 1:
        raise RuntimeError("flaky service: try again")
    return f"flaky {name}"


def debug_workflow() -> Workflow:
    """fan -> (fetch | ask) -> finish."""
    wf = Workflow("debug", state={"log": "append"})

    @wf.step
    async def fan(ctx: StepContext) -> Next:
        return goto("fetch", "ask", log=["fan"])

    @wf.step
    async def fetch(ctx: StepContext) -> Next:
        both = await asyncio.gather(slow("a"), flaky("b"))
        return goto("finish", log=list(both))

    @wf.step
    async def ask(ctx: StepContext) -> Next:
        answer = ctx.interrupt({"question": "ship it?"})
        return goto("finish", log=[f"answer={answer}"])

    @wf.step
    async def finish(ctx: StepContext) -> Next:
        return end(log=["done"])

    return wf
