"""A re-executed step gets each task's own recorded result, or a NondeterminismError
when the code no longer calls the tasks the history has (issue 19, item 3).

On memory and SQLite. Every task body appends to a list, so a test sees
whether a recorded task ran again.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentlog.errors import NondeterminismError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunStatus
from agentlog.runtime import Runtime, StepContext, Workflow, end
from tests.support.runtime import FAST_RETRY, config, event_log, run_to_rest

__all__ = ["event_log"]


def _checkout(ran: list[str], order: list[str]) -> Workflow:
    """One step that calls the tasks named in ``order``, one after another, then
    asks for approval (so that a resume re-executes it)."""
    wf = Workflow("checkout", state={"receipts": "replace", "ok": "replace"})

    @wf.step
    async def pay(ctx: StepContext) -> Any:
        receipts = {}
        for name in order:

            def effect(name: str = name) -> str:
                ran.append(name)
                return f"receipt of {name}"

            receipts[name] = await ctx.task(name, effect)
        ok = ctx.interrupt("approve?", expects="bool")
        return end(receipts=receipts, ok=ok)

    return wf


async def _park_then_resume_under(
    event_log: EventLog, ran: list[str], changed: list[str]
) -> Runtime:
    """Record a run of tasks reserve, charge that parks; resume it under ``changed``."""
    original = _checkout(ran, ["reserve", "charge"])
    async with Runtime(event_log, workflows=[original], config=config("v1")) as rt:
        await rt.start(original, run_id="c", durability="sync")
        assert (await run_to_rest(rt, "c")).status == RunStatus.WAITING
    assert ran == ["reserve", "charge"]
    return Runtime(event_log, workflows=[_checkout(ran, changed)], config=config("v2"))


@pytest.mark.parametrize(
    ("changed", "recorded", "requested"),
    [(["charge", "reserve"], "reserve", "charge"), (["charge"], "reserve", "charge")],
    ids=["reordered", "removed"],
)
async def test_a_reordered_or_removed_task_is_refused_on_resume(
    event_log: EventLog, changed: list[str], recorded: str, requested: str
) -> None:
    ran: list[str] = []
    async with await _park_then_resume_under(event_log, ran, changed) as rt:
        await rt.resume("c", True)
        with pytest.raises(NondeterminismError) as caught:
            await rt.wait("c", timeout=20)
        state = await rt.get_state("c")
    error = caught.value
    assert (error.run_id, error.step, error.position) == ("c", "pay", 0)
    assert (error.recorded, error.requested) == (recorded, requested)
    message = str(error)
    assert f"is {requested!r}, but the run's history has {recorded!r}" in message
    assert "agentlog verify" in message and "migration" in message
    assert ran == ["reserve", "charge"]  # nothing ran again
    assert "receipts" not in state.values  # no task was handed another's result


async def test_the_unchanged_order_resumes_with_each_task_s_own_result(
    event_log: EventLog,
) -> None:
    ran: list[str] = []
    async with await _park_then_resume_under(event_log, ran, ["reserve", "charge"]) as rt:
        await rt.resume("c", True)
        done = await run_to_rest(rt, "c")
    assert done.status == RunStatus.COMPLETED
    assert done.values["receipts"] == {
        "reserve": "receipt of reserve",
        "charge": "receipt of charge",
    }
    assert ran == ["reserve", "charge"]


async def test_parallel_tasks_may_start_in_another_order_on_re_execution(
    event_log: EventLog,
) -> None:
    """Two lookups side by side, each a fetch then a summary, then a report in order.

    The first attempt starts both fetches, then each lookup fails before its
    summary. On the retry the recorded fetches return at once, so each lookup
    runs its summary before the other's fetch is even asked for: the tasks
    start in another order than the history's, which is not a changed task.
    """
    ran: list[str] = []
    flaked: set[str] = set()
    wf = Workflow("lookups", state={"report": "replace"}, retry=FAST_RETRY)

    def effect(name: str) -> str:
        ran.append(name)
        return f"<{name}>"

    async def lookup(ctx: StepContext, which: str) -> str:
        fetched = await ctx.task(f"fetch.{which}", effect, f"fetch.{which}")
        if which not in flaked:
            flaked.add(which)
            raise ConnectionError(f"lookup {which} dropped its connection")
        return str(await ctx.task(f"sum.{which}", effect, f"sum of {fetched}"))

    @wf.step
    async def research(ctx: StepContext) -> Any:
        summaries = await ctx.gather(lookup(ctx, "a"), lookup(ctx, "b"))
        report = await ctx.task("report", effect, " + ".join(summaries))
        if not ctx.interrupt("publish?", expects="bool"):
            return end(report=None)
        return end(report=report)

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="p", durability="sync")
        parked = await run_to_rest(rt, "p")
        assert parked.status == RunStatus.WAITING, parked.error
        await rt.resume("p", True)
        done = await run_to_rest(rt, "p")
    assert done.status == RunStatus.COMPLETED, done.error
    assert done.values["report"] == "<<sum of <fetch.a>> + <sum of <fetch.b>>>"
    report = "<sum of <fetch.a>> + <sum of <fetch.b>>"
    effects = ["fetch.a", "fetch.b", "sum of <fetch.a>", "sum of <fetch.b>", report]
    assert sorted(ran) == sorted(effects)  # each effect once: the resume re-ran none


async def test_a_task_that_ran_again_may_lead_the_step_another_way(event_log: EventLog) -> None:
    """A failed task runs again on the step's retry; when it now succeeds, the
    fallback the first attempt took is not called, and that is not a change of code."""
    ran: list[str] = []
    failures = {"primary": 1, "step": 1}
    wf = Workflow("fallback", state={"answer": "replace"}, retry=FAST_RETRY)

    def effect(name: str) -> str:
        ran.append(name)
        if failures.get(name, 0) > 0:
            failures[name] -= 1
            raise ConnectionError(f"{name} is down")
        return name

    @wf.step
    async def answer(ctx: StepContext) -> Any:
        try:
            source = await ctx.task("primary", effect, "primary")
        except ConnectionError:
            source = await ctx.task("fallback", effect, "fallback")
        if failures["step"] > 0:
            failures["step"] -= 1
            raise ConnectionError("the step's own flake")
        return end(answer=await ctx.task("publish", effect, f"publish {source}"))

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="f", durability="sync")
        done = await run_to_rest(rt, "f")
    assert done.status == RunStatus.COMPLETED, done.error
    assert done.values == {"answer": "publish primary"}
    assert ran == ["primary", "fallback", "primary", "publish primary"]


async def test_a_task_called_from_a_child_task_is_matched_by_its_key(
    event_log: EventLog,
) -> None:
    """A plain asyncio.gather (each call in a task of its own), re-executed on resume."""
    ran: list[str] = []
    wf = Workflow("fanout", state={"hits": "replace"})

    def effect(name: str) -> str:
        ran.append(name)
        return name.upper()

    @wf.step
    async def search(ctx: StepContext) -> Any:
        hits = await asyncio.gather(*(ctx.task(f"search.{n}", effect, n) for n in "xyz"))
        ctx.interrupt("keep?", expects="bool")
        return end(hits=list(hits))

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="g", durability="sync")
        assert (await run_to_rest(rt, "g")).status == RunStatus.WAITING
        await rt.resume("g", True)
        done = await run_to_rest(rt, "g")
    assert done.values == {"hits": ["X", "Y", "Z"]}
    assert sorted(ran) == ["x", "y", "z"]
