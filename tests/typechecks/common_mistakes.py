"""Common mistakes with the API; mypy --strict and pyright must each report every one.

Held out from the API's own code (issue 24, item 7): each line that must be
reported ends with ``# mistake: <what>``, and no other line may be. This file
is type-checked by ``tests/typechecks/test_common_mistakes.py`` and never run.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from agentlog.projector import append  # the reducers as names: a typo is an undefined name
from agentlog.runtime import Next, Runtime, Send, StepContext, Workflow, end, goto, task


@task
async def charge(customer: str, cents: int) -> str:
    return f"{customer}:{cents}"


class Approval(TypedDict):
    approved: bool
    note: str


class Research(TypedDict):
    topic: str
    notes: Annotated[list[str], append]
    draft: str


class ResearchWrites(TypedDict, total=False):
    """What a step of ``research`` may write: some of the state's keys."""

    topic: str
    notes: list[str]
    draft: str


class ToolCall(TypedDict):
    call: str


class Order(TypedDict):
    order_id: str
    cents: NotRequired[int]


research = Workflow("research", state=Research)
orders = Workflow("orders", state={"order_id": "replace", "cents": "replace"}, input=Order)


typo = Workflow("typo", state={"notes": "apend"})  # mistake: a reducer name typo in a dict


@research.step
async def tool(ctx: StepContext[Research, ToolCall]) -> ResearchWrites:
    return {"notes": [ctx.input["cal"]]}  # mistake: a Send input key typo in the step


@research.step
async def plan(ctx: StepContext[Research]) -> Next[ResearchWrites]:
    charge("cus_1", 500)  # mistake: a forgotten await on a task
    ctx.task("charge", charge, "cus_1", 500)  # mistake: a forgotten await on ctx.task
    await ctx.interrupt("go on?", expects=bool)  # mistake: awaiting an interrupt
    await ctx.interrupt("anything to add?")  # mistake: awaiting an interrupt without expects
    note: str = ctx.interrupt("approve?", expects=bool)  # mistake: a wrong answer type
    ctx.interrupt("ok?", expects=Approval)["aproved"]  # mistake: an answer key typo
    yes: Literal["yes"] = ctx.interrupt("?", expects=Literal["yes", "no"])  # mistake: a Literal
    limit = ctx.interrupt("limit?", expects=int | None)
    limit + 1  # mistake: an Optional answer used without a None check
    Send.to(tool, {"cal": note})  # mistake: a wrong Send key
    Send.to(tool, ToolCall(call=3))  # mistake: a Send input of the wrong type
    goto(draft, writes=ResearchWrites(drfat=yes))  # mistake: a goto write key typo
    return end({"nots": [note]})  # mistake: an end write key typo


@research.step
async def draft(ctx: StepContext[Research]) -> Next[ResearchWrites]:
    words: int = ctx.state["draft"]  # mistake: a state value of the wrong type
    return end({"draft": words})  # mistake: an end write of the wrong type


@research.step  # mistake: a step that is not async
def review(ctx: StepContext[Research]) -> None:
    return None


async def main(rt: Runtime) -> None:
    rt.start(research, run_id="r")  # mistake: a forgotten await on rt.start
    await rt.start(orders, run_id="o", input=Order(ordr_id="o-1"))  # mistake: a start input typo
    await rt.start(orders, run_id="p", input=Order(order_id=7))  # mistake: a start input type
    await rt.start(orders, run_id="q", input=Order(cents=5))  # mistake: a missing start input key
    await rt.start(orders, run_id="t", input=Order(order_id="o-1", cents=5))
    await rt.start(research, run_id="u", input={"topic": "x"})
    await rt.start(research, run_id="s", input=Research(topic="x"))  # mistake: a partial state


def helper(rt: Runtime, wf: Workflow[Any]) -> None:
    del rt, wf
