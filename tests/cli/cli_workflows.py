"""Workflows the CLI tests drive; also copied as a user's own file for ``--app``."""

from __future__ import annotations

from agentlog.runtime import RetryPolicy, StepContext, Workflow, end, goto
from agentlog.runtime._workflow import Next


def parked_workflow() -> Workflow:
    """Writes a note, then parks on a yes/no question."""
    wf = Workflow("cli-wf", state={"notes": "append", "answer": "replace"})

    @wf.step
    async def first(ctx: StepContext) -> Next:
        return goto("second", notes=["one"])

    @wf.step
    async def second(ctx: StepContext) -> Next:
        answer = ctx.interrupt({"question": "ok?"}, expects="bool")
        return end(notes=["two"], answer=answer)

    return wf


#: Flip to False to "fix" :func:`flaky_workflow` before ``agentlog retry``.
BROKEN = {"yes": True}


def flaky_workflow() -> Workflow:
    """One step that fails while BROKEN says so (one attempt, no retry)."""
    wf = Workflow("cli-flaky", state={"done": "replace"}, retry=RetryPolicy(max_attempts=1))

    @wf.step
    async def work(ctx: StepContext) -> Next:
        if BROKEN["yes"]:
            raise RuntimeError("the model is down")
        return end(done=True)

    return wf


workflows = [parked_workflow(), flaky_workflow()]
