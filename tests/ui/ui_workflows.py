"""Workflows the UI tests record, and load in the server with ``--app``."""

from __future__ import annotations

from typing import Any

from agentlog.runtime import StepContext, Workflow, end, goto
from agentlog.runtime._workflow import Next

#: What an attacker would put in an event's payload: if the page ever
#: rendered it as markup, one of these would set ``window.__pwned``.
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


async def _echo(value: Any) -> Any:
    return value


def fanout_workflow() -> Workflow:
    """plan, then left and right in parallel, then finish (after right):
    three supersteps, four lanes, a task in each."""
    wf = Workflow("ui-fanout", state={"notes": "append", "topic": "replace"})

    @wf.step
    async def plan(ctx: StepContext) -> Next:
        note = await ctx.task("search", _echo, f"plan {ctx.state['topic']}")
        return goto("left", "right", notes=[note])

    @wf.step
    async def left(ctx: StepContext) -> Next:
        return end(notes=[await ctx.task("fetch", _echo, "left")])

    @wf.step
    async def right(ctx: StepContext) -> Next:
        return goto("finish", notes=[await ctx.task("fetch", _echo, "right")])

    @wf.step
    async def finish(ctx: StepContext) -> Next:
        return end(notes=["done"])

    return wf


def approval_workflow() -> Workflow:
    """Writes a draft, then parks on a question; the answer ends the run."""
    wf = Workflow("ui-approve", state={"draft": "replace", "answer": "replace"})

    @wf.step
    async def draft(ctx: StepContext) -> Next:
        return goto("ask", draft=f"draft about {ctx.state.get('draft')}")

    @wf.step
    async def ask(ctx: StepContext) -> Next:
        answer = ctx.interrupt({"question": "send it?"})
        return end(answer=answer)

    return wf


def review_workflow() -> Workflow:
    """Parks on a question whose answer must be ``{"approved": bool, "note": str}``."""
    wf = Workflow("ui-review", state={"verdict": "replace"})

    @wf.step
    async def review(ctx: StepContext) -> Next:
        verdict = ctx.interrupt(
            {"question": "ship the summary?"}, expects={"approved": "bool", "note": "str"}
        )
        return end(verdict=verdict)

    return wf


workflows = [fanout_workflow(), approval_workflow(), review_workflow()]
