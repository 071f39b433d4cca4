"""Deliberate mistakes a user could make with the public API; mypy --strict must report each.

Each line that must be reported ends with ``# seeded: <what>``. This file is
type-checked by ``tests/typechecks/test_typing.py`` and never run.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from agentlog.runtime import (
    RetryPolicy,
    Runtime,
    RuntimeConfig,
    StepContext,
    TaskOptions,
    Workflow,
    end,
    goto,
    task,
)


@task
async def charge(customer: str, cents: int) -> str:
    return f"{customer}:{cents}"


@task(retry=RetryPolicy(max_attempts=3))
def lookup(order_id: int) -> dict[str, Any]:
    return {"id": order_id}


@task(name="llm.chat")
async def chat(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return messages[-1]


wf = Workflow("shop", state={"receipt": "replace"})
typo = Workflow("typo", state={"notes": "apend"})  # seeded: an unknown reducer name


@wf.step
async def pay(ctx: StepContext) -> Any:
    await charge(500, "cus_1")  # seeded: swapped task arguments
    cents: int = await charge("cus_1", 500)  # seeded: wrong result type
    await ctx.task("charge", charge, "cus_1")  # seeded: missing task argument
    await ctx.task("lookup", lookup, "not-an-int")  # seeded: wrong argument type via ctx.task
    limited = TaskOptions("lookup", timeout=30)
    await ctx.task(limited, lookup, "not-an-int")  # seeded: wrong argument type with TaskOptions
    await ctx.task(limited, lookup, 7)  # the limits keep the function's signature checked
    order: str = await lookup(7)  # seeded: sync task result type
    reply: str = await chat([{"role": "user"}])  # seeded: result of a task with Any in it
    await chat("hello")  # seeded: argument of a task with Any in it
    return end(receipt=cents, order=order, reply=reply)


class Research(TypedDict):
    topic: str
    notes: Annotated[list[str], "append"]


class ResearchWrites(TypedDict, total=False):
    """Typed writes: a step returns some of the state's keys."""

    topic: str
    notes: list[str]


typed = Workflow("research", state=Research)


@typed.step
async def note(ctx: StepContext[Research]) -> ResearchWrites:
    return {"nots": ["typo"]}  # seeded: a write to a key the state does not have


@typed.step
async def plan(ctx: StepContext[Research]) -> Any:
    ctx.state["topik"]  # seeded: a state key typo
    return goto(drfat)  # noqa: F821  # seeded: an unknown step


@typed.step
async def draft(ctx: StepContext[Research]) -> Any:
    words: int = ctx.state["topic"]  # seeded: a state value of the wrong type
    return end(words=words)


@typed.step  # seeded: a step written for another workflow's state
async def stranger(ctx: StepContext[dict[str, int]]) -> Any:
    return None


async def main(rt: Runtime) -> None:
    await rt.start(wf, run_id="r", durability="fast")  # seeded: bad durability
    RuntimeConfig(durability="sometimes")  # seeded: bad default durability
    RetryPolicy(max_attempts="3")  # seeded: bad retry option
