"""A supervisor agent: three child agents, a webhook, and progress for watchers.

``delegate`` starts three child runs of the ``researcher`` agent side by side
(``ctx.start_child``) and waits for each (``handle.result()``): the
supervisor parks while they work, holding no process, and each child's end
wakes it. It publishes its progress (``ctx.publish``), which any process
reads with ``rt.get_event``. ``decide`` waits for a webhook message
(``ctx.recv``) that the outside world sends with ``rt.send``.

Each child's run id is derived from the supervisor's call, so after a crash
the supervisor's step finds the children it started instead of starting new
ones. Run it: ``python examples/supervisor.py``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from agentlog.errors import EventNotPublishedError
from agentlog.runtime import Runtime, StepContext, Workflow, end, task


@task(name="llm.research")
async def research(question: str) -> str:
    return f"three sources agree on {question!r}"


researcher = Workflow("researcher", state={"question": "replace", "answer": "replace"})


@researcher.step
async def answer(ctx: StepContext) -> Any:
    return end(answer=await research(ctx.state["question"]))


supervisor = Workflow(
    "supervisor", state={"answers": "replace", "approved": "replace", "report": "replace"}
)
QUESTIONS = ["history", "state of the art", "open problems"]


@supervisor.step(then="decide")
async def delegate(ctx: StepContext) -> Any:
    children = [await ctx.start_child(researcher, {"question": q}) for q in QUESTIONS]
    answers: list[str] = []
    for done, child in enumerate(children, start=1):
        answers.append((await child.result())["answer"])
        await ctx.publish("progress", f"{done}/{len(children)} researchers done")
    return {"answers": answers}


@supervisor.step
async def decide(ctx: StepContext) -> Any:
    webhook = await ctx.recv("approval", timeout=timedelta(hours=1))
    approved = webhook is not None and bool(webhook.get("approved"))
    return end(approved=approved, report="\n".join(ctx.state["answers"]))


async def main(log_url: str) -> dict[str, Any]:
    async with await Runtime.open(log_url, workflows=[supervisor, researcher]) as rt:
        run = await rt.start(supervisor, run_id="supervisor-1")
        progress = None
        while progress != "3/3 researchers done":  # a watcher in any process
            try:
                progress = await rt.get_event("supervisor-1", "progress", timeout=60)
            except EventNotPublishedError as exc:
                raise SystemExit(f"no progress within a minute: {exc}") from exc
            await asyncio.sleep(0.05)
        # The webhook handler: a retried delivery with the same key is stored once.
        await rt.send("supervisor-1", "approval", {"approved": True}, idempotency_key="hook-1")
        values = await run.result(timeout=60)
    print(values["report"])
    print(f"supervisor-1: completed, approved={values['approved']}")
    return values


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    asyncio.run(main(f"sqlite:///{folder / 'supervisor.db'}"))
