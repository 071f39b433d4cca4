"""Shared workflows, fixtures and helpers for the runtime and projector tests.

The workflows here count every real call (step bodies and task functions)
in a :class:`Calls` object, so a test can prove that a recorded result was
returned instead of recomputed.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import Event
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.projector import load_state
from agentlog.projector._state import RunState
from agentlog.runtime import RetryPolicy, Runtime, RuntimeConfig, StepContext, Workflow, end, goto

#: Backends every runtime unit test runs on.
BACKENDS = ("memory", "sqlite")

FAST_RETRY = RetryPolicy(max_attempts=3, initial_interval=0.001, backoff_coefficient=1.0)


class Calls:
    """Counts real executions by name, and keeps what each task was given."""

    def __init__(self) -> None:
        self.count: Counter[str] = Counter()
        self.keys: dict[str, list[str]] = {}

    def hit(self, name: str, key: str | None = None) -> int:
        """Count one execution of ``name``; return how many there were."""
        self.count[name] += 1
        if key is not None:
            self.keys.setdefault(name, []).append(key)
        return self.count[name]


@pytest.fixture(params=BACKENDS)
async def event_log(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[EventLog]:
    """A fresh log on each backend (closed after the test)."""
    log: EventLog
    if request.param == "memory":
        log = MemoryEventLog()
    else:
        log = SqliteEventLog(tmp_path / "agentlog.db")
    try:
        yield log
    finally:
        await log.close()


def config(owner: str = "test", **kwargs: Any) -> RuntimeConfig:
    """A runtime config for tests: a named owner, a long lease, and no
    background worker: these tests move runs by hand (start, resume, recover)
    and check each step; the worker's own tests turn it on."""
    return RuntimeConfig(owner=owner, **{"lease_seconds": 30.0, "worker": False, **kwargs})


async def events_of(log: EventLog, run_id: str) -> list[Event]:
    """Every recorded event of the run, in seq order."""
    return [event async for event in log.read(run_id)]


async def types_of(log: EventLog, run_id: str) -> list[str]:
    """The recorded event types of the run, in seq order."""
    return [event.type for event in await events_of(log, run_id)]


async def replay(log: EventLog, run_id: str, **kwargs: Any) -> RunState:
    """The run's state folded from its events alone (no snapshot)."""
    return await load_state(log, run_id, use_snapshots=False, **kwargs)


def research_workflow(
    calls: Calls,
    *,
    name: str = "research",
    version: str = "1",
    flaky_branch_failures: int = 0,
    with_approval: bool = True,
) -> Workflow:
    """plan -> (search_a | search_b | search_c) -> draft -> approve? -> send.

    ``search_b`` raises ``flaky_branch_failures`` times before it succeeds.
    """
    wf = Workflow(
        name,
        version=version,
        state={"topic": "replace", "notes": "append", "draft": "replace", "sent": "replace"},
        retry=FAST_RETRY,
    )
    failures = {"left": flaky_branch_failures}

    def llm(prompt: str, idempotency_key: str) -> str:
        calls.hit("llm", idempotency_key)
        return f"<{prompt}>"

    @wf.step
    async def plan(ctx: StepContext) -> Any:
        calls.hit("plan")
        text = await ctx.task("llm.plan", llm, f"plan {ctx.state['topic']}")
        return goto("search_a", "search_b", "search_c", notes=[text])

    async def search(ctx: StepContext, which: str) -> dict[str, Any]:
        calls.hit(ctx.step)
        if which == "b" and failures["left"] > 0:
            failures["left"] -= 1
            raise RuntimeError("search backend flaked")
        hit = await ctx.task("search", llm, f"search {which}")
        return {"notes": [hit]}

    for which in "abc":

        async def body(ctx: StepContext, which: str = which) -> dict[str, Any]:
            return await search(ctx, which)

        wf.step(name=f"search_{which}", then="draft")(body)

    @wf.step
    async def draft(ctx: StepContext) -> Any:
        calls.hit("draft")
        text = await ctx.task("llm.draft", llm, "|".join(ctx.state["notes"]))
        return goto("approve" if with_approval else "send", draft=text)

    @wf.step(then="send")
    async def approve(ctx: StepContext) -> Any:
        calls.hit("approve")
        answer = ctx.interrupt({"draft": ctx.state["draft"]}, expects={"approved": "bool"})
        calls.hit("approve.answered")
        if not answer["approved"]:
            return end(sent=False)
        return None

    @wf.step
    async def send(ctx: StepContext) -> Any:
        calls.hit("send")

        def email(body: str, idempotency_key: str) -> str:
            calls.hit("email", idempotency_key)
            return f"sent:{len(body)}"

        receipt = await ctx.task("email", email, ctx.state["draft"])
        return end(sent=receipt)

    return wf


async def run_to_rest(rt: Runtime, run_id: str, seconds: float = 20.0) -> RunState:
    """Wait until the run parks or ends (bounded, so a hang fails the test)."""
    async with asyncio.timeout(seconds):
        return await rt.wait(run_id)


class Gate:
    """An asyncio.Event pair: a step says it got here, the test lets it go on."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()
        self.release = asyncio.Event()

    async def pass_through(self) -> None:
        """Called by a step: announce arrival, then wait to be released."""
        self.reached.set()
        await self.release.wait()
