"""Bad input: a clear typed error, nothing recorded is lost, the run can be continued."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentlog.errors import (
    InvalidResumeValueError,
    NotSerializableError,
    RunFailedError,
    RunNotWaitingError,
    UnknownRunError,
    UnknownWorkflowError,
)
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunStatus
from agentlog.runtime import Runtime, StepContext, Workflow, end, goto
from tests.support.runtime import (
    Calls,
    config,
    event_log,
    replay,
    research_workflow,
    run_to_rest,
    types_of,
)

__all__ = ["event_log"]


async def test_resume_of_a_run_that_is_not_waiting(event_log: EventLog) -> None:
    calls = Calls()
    wf = research_workflow(calls, with_approval=False)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="done", input={"topic": "t"}, durability="sync")
        assert (await run_to_rest(rt, "done")).status == RunStatus.COMPLETED
        before = await types_of(event_log, "done")
        with pytest.raises(RunNotWaitingError, match="completed, not waiting"):
            await rt.resume("done", {"approved": True})
    assert await types_of(event_log, "done") == before


async def test_resume_with_a_value_of_the_wrong_shape(event_log: EventLog) -> None:
    calls = Calls()
    wf = research_workflow(calls)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="w", input={"topic": "t"}, durability="sync")
        await run_to_rest(rt, "w")
        before = await types_of(event_log, "w")
        for bad in ("yes", {"approve": True}, {"approved": "yes"}, {"approved": 1}, None):
            with pytest.raises(InvalidResumeValueError, match="resume again"):
                await rt.resume("w", bad)
        assert await types_of(event_log, "w") == before
        assert (await replay(event_log, "w")).status == RunStatus.WAITING
        await rt.resume("w", {"approved": False})
        final = await run_to_rest(rt, "w")
    assert final.status == RunStatus.COMPLETED and final.values["sent"] is False
    assert calls.count["email"] == 0


async def test_unknown_run(event_log: EventLog) -> None:
    async with Runtime(event_log, workflows=[], config=config()) as rt:
        with pytest.raises(UnknownRunError, match="nope"):
            await rt.resume("nope", 1)
        with pytest.raises(UnknownRunError, match="nope"):
            await rt.cancel("nope")
        with pytest.raises(UnknownRunError, match="nope"):
            await rt.wait("nope")
        with pytest.raises(UnknownWorkflowError, match="not registered"):
            await rt.start("ghost", run_id="g")
    assert await event_log.list_runs() == []


def _routing_wf(calls: Calls, target: str) -> Workflow:
    wf = Workflow("route", state={"quote": "replace", "done": "replace"})

    def quote() -> int:
        calls.hit("quote")
        return 7

    @wf.step
    async def first(ctx: StepContext) -> Any:
        price = await ctx.task("quote", quote)
        return goto(target, quote=price)

    @wf.step
    async def finish(ctx: StepContext) -> Any:
        return end(done=True)

    return wf


async def test_unknown_step_target_then_fixed_code_continues(event_log: EventLog) -> None:
    calls = Calls()
    broken = _routing_wf(calls, "finsh")  # a typo in a route
    async with Runtime(event_log, workflows=[broken], config=config("a")) as rt:
        await rt.start(broken, run_id="u", durability="sync")
        with pytest.raises(
            RunFailedError, match="UnknownStepError: step 'first' routed to 'finsh'"
        ):
            await asyncio.wait_for(rt.wait("u"), 20)
    types = await types_of(event_log, "u")
    assert "StepCompleted" not in types
    # the paid task's result is kept; the code error is on record
    assert types[-3:] == ["TaskCompleted", "StepFailed", "RunFailed"]
    assert (await event_log.get_run("u")).status == RunStatus.FAILED
    fixed = _routing_wf(calls, "finish")
    async with Runtime(event_log, workflows=[fixed], config=config("b")) as rt:
        await rt.retry("u")  # retrying under fixed code continues it
        final = await run_to_rest(rt, "u")
    assert final.status == RunStatus.COMPLETED
    assert final.values == {"quote": 7, "done": True}
    assert calls.count["quote"] == 1


async def test_non_serializable_write_then_fixed_code_continues(event_log: EventLog) -> None:
    holder: dict[str, Any] = {"value": object()}
    wf = Workflow("ser", state={"x": "replace"})

    @wf.step
    async def write(ctx: StepContext) -> Any:
        return end(x=holder["value"])

    async with Runtime(event_log, workflows=[wf], config=config("a")) as rt:
        await rt.start(wf, run_id="s", durability="sync")
        with pytest.raises(NotSerializableError, match="object"):
            await asyncio.wait_for(rt.wait("s"), 20)
    assert "StepCompleted" not in await types_of(event_log, "s")
    holder["value"] = "fine"
    async with Runtime(event_log, workflows=[wf], config=config("b")) as rt:
        assert (await rt.recover()).recovered == ["s"]
        final = await run_to_rest(rt, "s")
    assert final.values == {"x": "fine"}


async def test_non_serializable_task_result_is_not_recorded_and_reruns(
    event_log: EventLog,
) -> None:
    calls = Calls()
    holder: dict[str, Any] = {"value": {1, 2}}
    wf = Workflow("ser", state={"x": "replace"})

    def effect(idempotency_key: str) -> Any:
        calls.hit("effect", idempotency_key)
        return holder["value"]

    @wf.step
    async def call(ctx: StepContext) -> Any:
        return end(x=await ctx.task("effect", effect))

    async with Runtime(event_log, workflows=[wf], config=config("a")) as rt:
        await rt.start(wf, run_id="s", durability="async")
        with pytest.raises(NotSerializableError, match="set"):
            await asyncio.wait_for(rt.wait("s"), 20)
    types = await types_of(event_log, "s")
    # recorded as a typed task failure, not as a result; the step is not retried
    assert types[-2:] == ["TaskStarted", "TaskFailed"] and "TaskCompleted" not in types
    holder["value"] = [1, 2]
    async with Runtime(event_log, workflows=[wf], config=config("b")) as rt:
        await rt.start(wf, run_id="s")
        final = await run_to_rest(rt, "s")
    assert final.values == {"x": [1, 2]}
    keys = calls.keys["effect"]
    assert len(keys) == 2 and keys[0] == keys[1]  # the same idempotency key both times


async def test_write_to_undeclared_key(event_log: EventLog) -> None:
    wf = Workflow("keys", state={"x": "replace"})

    @wf.step
    async def write(ctx: StepContext) -> Any:
        return end(y=1)

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="k", durability="sync")
        with pytest.raises(RunFailedError, match=r"InvalidWriteError: .*'y'.*does not declare"):
            await asyncio.wait_for(rt.wait("k"), 20)
    assert await types_of(event_log, "k") == ["RunStarted", "StepFailed", "RunFailed"]


async def test_step_returning_something_else_or_a_write_the_reducer_rejects(
    event_log: EventLog,
) -> None:
    wf = Workflow("shape", state={"m": "merge"})

    @wf.step
    async def bad(ctx: StepContext) -> Any:
        return 42 if ctx.run_id == "int" else {"m": [1]}

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        for run_id, match in (("int", "returned int"), ("merge", "rejected its write")):
            await rt.start(wf, run_id=run_id, durability="sync")
            with pytest.raises(RunFailedError, match=f"InvalidWriteError: .*{match}"):
                await asyncio.wait_for(rt.wait(run_id), 20)
            assert await types_of(event_log, run_id) == ["RunStarted", "StepFailed", "RunFailed"]
