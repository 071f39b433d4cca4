"""Child runs (``ctx.child``, ``ctx.start_child``), on memory and SQLite.

A child's id is derived from the parent's call and its start is a task of the
parent's step, so a re-executed step finds the same child; the parent parks
until the child ends, and the child's end wakes it with the child's result
(or failure).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from agentlog.errors import RunCancelledError, UnknownRunError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunStatus
from agentlog.projector._state import RunState
from agentlog.replay import verify_history
from agentlog.runtime import Runtime, StepContext, Workflow, end
from tests.support.runtime import Calls, config, event_log, events_of

__all__ = ["event_log"]


class ChildBroke(Exception):
    """A child's own failure, which the parent catches by its class."""


def child_workflow(calls: Calls) -> Workflow:
    """out = n * 10; n == 0 raises ChildBroke."""
    wf = Workflow("child", state={"n": "replace", "out": "replace"})

    @wf.step
    async def work(ctx: StepContext) -> Any:
        n = ctx.state["n"]
        calls.hit(f"child {n}")
        if n == 0:
            raise ChildBroke(f"child {n} broke")
        return end(out=n * 10)

    return wf


def parent_workflow(child: Workflow, calls: Calls, ns: list[int]) -> Workflow:
    """Start one child per n in parallel, then await them all; a failing
    child's class is caught and recorded as "broke"."""
    wf = Workflow("parent", state={"outs": "replace"})

    @wf.step
    async def fan(ctx: StepContext) -> Any:
        calls.hit("fan")
        handles = [await ctx.start_child(child, {"n": n}) for n in ns]
        outs: list[Any] = []
        for handle in handles:
            try:
                outs.append((await handle.result())["out"])
            except ChildBroke as exc:
                outs.append(f"broke: {exc}")
        return end(outs=outs)

    return wf


async def _until_ended(rt: Runtime, run_id: str, seconds: float = 20.0) -> RunState:
    """Poll the run's state until it ends (bounded: a hang fails with its status)."""
    state = await rt.get_state(run_id)
    try:
        async with asyncio.timeout(seconds):
            while not state.is_terminal:
                await asyncio.sleep(0.05)
                state = await rt.get_state(run_id)
    except TimeoutError:
        pytest.fail(f"run {run_id!r} did not end within {seconds}s: it is {state.status}")
    return state


async def test_parent_with_three_children_completes_with_their_results(
    event_log: EventLog,
) -> None:
    calls = Calls()
    child = child_workflow(calls)
    parent = parent_workflow(child, calls, [1, 2, 3])
    async with Runtime(event_log, workflows=[parent, child], config=config()) as rt:
        await rt.start(parent, run_id="p")
        state = await _until_ended(rt, "p")
        assert state.status == RunStatus.COMPLETED, state.error
        assert state.values["outs"] == [10, 20, 30]
        kids = [f"p/fan/0:0:{i}" for i in range(3)]
        for i, kid in enumerate(kids, start=1):
            kid_state = await rt.get_state(kid)
            assert kid_state.status == RunStatus.COMPLETED
            link = {"run_id": "p", "step": "fan", "call": f"0:0:{i - 1}"}
            assert kid_state.limits["parent"] == link
        # the parent's history replays under its code (verify): starts and results recorded
        assert await verify_history(parent, await events_of(event_log, "p")) == []
    # however often the parent's step ran (it parks until its children end),
    # each child started once
    assert [calls.count[f"child {n}"] for n in (1, 2, 3)] == [1, 1, 1]


async def test_a_re_executed_parent_step_does_not_start_a_second_child(
    event_log: EventLog,
) -> None:
    calls = Calls()
    child = child_workflow(calls)
    wf = Workflow("flaky_parent", state={"outs": "replace"})

    @wf.step
    async def fan(ctx: StepContext) -> Any:
        handle = await ctx.start_child(child, {"n": 7})
        if calls.hit("fan") == 1:
            raise RuntimeError("the step fails once, after starting its child")
        return end(outs=[(await handle.result())["out"]])

    async with Runtime(event_log, workflows=[wf, child], config=config()) as rt:
        await rt.start(wf, run_id="q")
        state = await _until_ended(rt, "q")
        assert state.status == RunStatus.COMPLETED, state.error
        assert state.values["outs"] == [70]
        runs = [info.run_id for info in await event_log.list_runs()]
    assert sorted(runs) == ["q", "q/fan/0:0:0"]
    assert calls.count["child 7"] == 1


async def test_a_failing_child_raises_its_class_in_the_parent(event_log: EventLog) -> None:
    calls = Calls()
    child = child_workflow(calls)
    parent = parent_workflow(child, calls, [0, 4])
    async with Runtime(event_log, workflows=[parent, child], config=config()) as rt:
        await rt.start(parent, run_id="f")
        state = await _until_ended(rt, "f")
    assert state.status == RunStatus.COMPLETED, state.error
    assert state.values["outs"] == ["broke: child 0 broke", 40]


async def test_cancelling_the_parent_cancels_its_children(event_log: EventLog) -> None:
    child = Workflow("waiting_child", state={"got": "replace"})

    @child.step
    async def wait(ctx: StepContext) -> Any:
        return end(got=await ctx.recv("never"))  # parks until cancelled

    parent = Workflow("canceller", state={"outs": "replace"})

    @parent.step
    async def fan(ctx: StepContext) -> Any:
        handles = [await ctx.start_child(child, {}) for _ in range(2)]
        return end(outs=[await handle.result() for handle in handles])

    kids = ["c/fan/0:0:0", "c/fan/0:0:1"]
    async with Runtime(event_log, workflows=[parent, child], config=config()) as rt:
        await rt.start(parent, run_id="c")
        for run_id in ["c", *kids]:
            await _until_status(rt, run_id, RunStatus.WAITING)
        state = await rt.cancel("c")
        assert state.status == RunStatus.CANCELLED
        for kid in kids:
            assert (await _until_ended(rt, kid)).status == RunStatus.CANCELLED


async def _until_status(rt: Runtime, run_id: str, status: str, seconds: float = 20.0) -> None:
    """Poll until the run has ``status`` (bounded: a hang fails with its status)."""
    current = ""
    try:
        async with asyncio.timeout(seconds):
            while current != status:
                with contextlib.suppress(UnknownRunError):
                    current = (await rt.get_state(run_id)).status
                await asyncio.sleep(0.05)
    except TimeoutError:
        shown = current or "not recorded"
        pytest.fail(f"run {run_id!r} is {shown}, not {status}, after {seconds}s")


async def test_cancelling_a_child_raises_run_cancelled_in_its_parent(event_log: EventLog) -> None:
    child = Workflow("idle_child", state={"got": "replace"})

    @child.step
    async def wait(ctx: StepContext) -> Any:
        return end(got=await ctx.recv("never"))

    parent = Workflow("watcher", state={"outcome": "replace"})

    @parent.step
    async def watch(ctx: StepContext) -> Any:
        try:
            await ctx.child(child, {})
        except RunCancelledError as exc:
            return end(outcome=f"cancelled: {exc.run_id}")
        return end(outcome="completed")

    async with Runtime(event_log, workflows=[parent, child], config=config()) as rt:
        await rt.start(parent, run_id="w")
        await _until_status(rt, "w/watch/0:0:0", RunStatus.WAITING)
        await _until_status(rt, "w", RunStatus.WAITING)
        await rt.cancel("w/watch/0:0:0")
        state = await _until_ended(rt, "w")
    assert state.status == RunStatus.COMPLETED, state.error
    assert state.values["outcome"] == "cancelled: w/watch/0:0:0"
