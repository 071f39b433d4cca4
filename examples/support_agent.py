"""A support agent: parallel knowledge-base searches, a draft, a human approval, one email.

Run it: ``python examples/support_agent.py`` (a SQLite log in a temporary
folder). It starts the run, which parks on the approval with no process
needed; then, as a reviewer would days later from any process, it answers the
interrupt and reads the result.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any, TypedDict

from agentlog.runtime import (
    RetryPolicy,
    Runtime,
    StepContext,
    Workflow,
    current_idempotency_key,
    end,
    goto,
    task,
)

SENT: dict[str, str] = {}  # the mail service: it drops a repeated idempotency key


@task(name="kb.search", retry=RetryPolicy(max_attempts=3, initial_interval=0.01))
async def search_kb(query: str) -> list[str]:
    """A paid search: retried on its own, recorded once it succeeds."""
    return [f"article about {query}"]


@task(name="llm.draft", timeout=30)
async def call_llm(notes: list[str]) -> str:
    return "Suggested reply, based on: " + "; ".join(notes)


@task(name="email.send")
async def send_email(text: str) -> str:
    key = current_idempotency_key()  # stable across retries and crashes
    SENT.setdefault(key, text)
    return key


class Approval(TypedDict):
    approved: bool


wf = Workflow(
    "support", version="1", state={"ticket": "replace", "notes": "append", "reply": "replace"}
)


@wf.step(routes=["draft"])
async def research(ctx: StepContext) -> Any:
    ticket = ctx.state["ticket"]
    hits = await ctx.gather(search_kb(ticket), search_kb(f"{ticket} faq"))  # side by side
    return goto("draft", notes=[hit for found in hits for hit in found])  # a delta


@wf.step
async def draft(ctx: StepContext) -> Any:
    text = await call_llm(list(ctx.state["notes"]))
    answer = ctx.interrupt({"reply": text}, expects=Approval)  # parks the run
    if answer["approved"]:
        await send_email(text)
    return end(reply=text)


async def main(log_url: str) -> dict[str, Any]:
    async with await Runtime.open(log_url, workflows=[wf]) as rt:
        run = await rt.start(wf, run_id="ticket-42", input={"ticket": "refund"}, durability="sync")
        parked = await run.wait(timeout=60)  # waiting: no process is needed from here
        print(f"{run.run_id}: {parked.status}, asks {(await run.pending())[0].payload}")
    # ... days later, from any process:
    async with await Runtime.open(log_url, workflows=[wf]) as rt:
        run = await rt.resume("ticket-42", {"approved": True})
        values = await run.result(timeout=60)
    print(f"ticket-42: completed; emails sent: {len(SENT)}")
    return values


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    asyncio.run(main(f"sqlite:///{folder / 'support.db'}"))
