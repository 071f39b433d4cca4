"""Regressions for the runtime defects of issue 8 (items 3, 6-13, 22), on memory and SQLite."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from agentlog.errors import (
    BackendUnavailableError,
    ConfigError,
    NoLiveWriterError,
    NotSerializableError,
    RunFailedError,
    RunNotFailedError,
    RunNotWaitingError,
    UnknownWorkflowError,
    VersionMismatchError,
    WorkflowDefinitionError,
)
from agentlog.eventlog._base import EventLog, Snapshot
from agentlog.eventlog.events import RunStatus, utcnow
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.projector._reducers import register_reducer
from agentlog.projector._snapshots import SnapshotPolicy
from agentlog.runtime import Runtime, StepContext, Workflow, end, goto
from tests.support.runtime import (
    FAST_RETRY,
    Calls,
    config,
    event_log,
    replay,
    run_to_rest,
    types_of,
)

__all__ = ["event_log"]


# -- item 3: a result that cannot be recorded ------------------------------------------


async def test_a_result_that_contains_itself_is_a_typed_failure_not_a_retry(
    event_log: EventLog,
) -> None:
    calls = Calls()
    fixed = {"done": False}
    wf = Workflow("loop", state={"x": "replace"}, retry=FAST_RETRY)

    def charge(idempotency_key: str) -> Any:
        calls.hit("charge", idempotency_key)
        if fixed["done"]:
            return ["ok"]
        result: list[Any] = []
        result.append(result)  # contains itself
        return result

    @wf.step
    async def pay(ctx: StepContext) -> Any:
        return end(x=await ctx.task("charge", charge))

    async with Runtime(event_log, workflows=[wf], config=config("a")) as rt:
        await rt.start(wf, run_id="p", durability="sync")
        with pytest.raises(NotSerializableError, match="containing itself"):
            await rt.wait("p", timeout=20)
    assert calls.count["charge"] == 1  # not retried as if the effect had not run
    types = await types_of(event_log, "p")
    assert types[-1] == "TaskFailed" and "StepFailed" not in types and "RunFailed" not in types
    fixed["done"] = True
    async with Runtime(event_log, workflows=[wf], config=config("b")) as rt:
        assert (await rt.recover()).recovered == ["p"]
        assert (await run_to_rest(rt, "p")).values == {"x": ["ok"]}
    assert len(set(calls.keys["charge"])) == 1  # the same idempotency key


async def test_a_write_nested_too_deep_is_a_typed_error(event_log: EventLog) -> None:
    wf = Workflow("deep", state={"x": "replace"})

    @wf.step
    async def write(ctx: StepContext) -> Any:
        value: list[Any] = []
        for _ in range(5000):
            value = [value]
        return end(x=value)

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="d", durability="sync")
        with pytest.raises(NotSerializableError, match="nested deeper"):
            await rt.wait("d", timeout=20)
    assert await types_of(event_log, "d") == ["RunStarted"]


# -- item 6: one bad run does not block recovery of the others -----------------------


async def test_recover_recovers_every_run_it_can_and_reports_the_rest(
    event_log: EventLog,
) -> None:
    gate = asyncio.Event()

    def workflow(name: str, version: str) -> Workflow:
        wf = Workflow(name, version=version, state={"x": "replace"})

        @wf.step
        async def work(ctx: StepContext) -> Any:
            await gate.wait()
            return end(x=1)

        return wf

    crashed = Runtime(event_log, config=config("dead", lease_seconds=0.01))
    for name in ("a", "b", "c"):
        await crashed.start(workflow(name, "1"), run_id=name, durability="sync")
    tasks = [crashed.driver.active_task(run_id) for run_id in crashed.active_runs]
    for task in tasks:  # the process dies: its tasks stop
        assert task is not None
        task.cancel()
    await asyncio.gather(*(t for t in tasks if t is not None), return_exceptions=True)
    gate.set()
    async with asyncio.timeout(30):  # the dead writer's short leases run out
        while await _live_leases(event_log):  # noqa: ASYNC110 - a condition in the log
            await asyncio.sleep(0.01)
    # b's code changed without a migration; c's workflow is not deployed here
    here = [workflow("a", "1"), workflow("b", "2")]
    async with Runtime(event_log, workflows=here, config=config("new")) as rt:
        report = await rt.recover()
        assert report.recovered == ["a"]
        assert set(report.failed) == {"b", "c"} and not report.ok
        assert isinstance(report.failed["b"], VersionMismatchError)
        assert isinstance(report.failed["c"], UnknownWorkflowError)
        assert (await run_to_rest(rt, "a")).status == RunStatus.COMPLETED


async def _live_leases(log: EventLog) -> bool:
    now = utcnow()
    return any(i.lease_expires_at and i.lease_expires_at > now for i in await log.list_runs())


# -- item 7: bad input never locks the run id ------------------------------------------


def _one_step(name: str = "once") -> Workflow:
    wf = Workflow(name, state={"x": "replace", "answer": "replace"})

    @wf.step
    async def ask(ctx: StepContext) -> Any:
        answer = ctx.interrupt("ok?", expects={"approved": "bool"})
        return end(answer=answer["approved"])

    return wf


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"input": [1, 2]}, ConfigError, "input must be a dict"),
        ({"input": "abc"}, ConfigError, "input must be a dict"),
        ({"input": {"x": {1, 2}}}, NotSerializableError, "set"),
        ({"durability": "bogus"}, ConfigError, "durability"),
        ({"max_steps": 0}, ConfigError, "max_steps"),
    ],
)
async def test_bad_start_arguments_claim_nothing(
    event_log: EventLog, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    wf = _one_step()
    tasks_before = len(asyncio.all_tasks())
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        with pytest.raises(error, match=match):
            await rt.start(wf, run_id="r", **kwargs)
        assert len(asyncio.all_tasks()) == tasks_before  # no orphaned writer task
        await rt.start(wf, run_id="r", input={"x": 1})  # the corrected call works at once
        assert (await run_to_rest(rt, "r")).status == RunStatus.WAITING


async def test_bad_run_ids_are_typed_errors(event_log: EventLog) -> None:
    wf = _one_step()
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        for bad in ("", "bad\udc80id"):
            with pytest.raises(ConfigError, match=r"run_id|run id"):
                await rt.start(wf, run_id=bad)
        assert await event_log.list_runs() == []


async def test_a_resume_value_that_cannot_be_stored_claims_nothing(event_log: EventLog) -> None:
    wf = _one_step()
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="r")
        await run_to_rest(rt, "r")
        with pytest.raises(NotSerializableError):
            await rt.resume("r", {"approved": True, "note": {1, 2}})
        await rt.resume("r", {"approved": True})  # no LeaseHeldError: nothing was claimed
        assert (await run_to_rest(rt, "r")).values["answer"] is True


PICKY: dict[str, Any] = {"broken": {"yes": False}}


def _picky(current: Any, update: Any) -> Any:
    if PICKY["broken"]["yes"] and current is not None:
        raise RuntimeError("picky cannot combine two writes")
    return update if current is None else [*current, *update]


register_reducer("picky-defects", _picky)


# -- items 8 and 9: a reducer that raises at the commit; retry -------------------------


async def test_a_reducer_raising_at_the_commit_fails_the_run_cleanly_and_retry_commits(
    event_log: EventLog,
) -> None:
    broken = {"yes": True}
    calls = Calls()

    PICKY["broken"] = broken
    wf = Workflow("fan", state={"hits": "picky-defects"})

    @wf.step
    async def plan(ctx: StepContext) -> Any:
        return goto("left", "right")

    @wf.step
    async def left(ctx: StepContext) -> Any:
        return {"hits": await ctx.task("search", lambda: calls.hit("left") and ["left"])}

    @wf.step
    async def right(ctx: StepContext) -> Any:
        return {"hits": await ctx.task("search", lambda: calls.hit("right") and ["right"])}

    async with Runtime(event_log, workflows=[wf], config=config("a")) as rt:
        await rt.start(wf, run_id="f", durability="sync")
        failed = await run_to_rest(rt, "f")
    assert failed.status == RunStatus.FAILED
    assert "'picky-defects' reducer of state key 'hits'" in failed.error
    assert (await types_of(event_log, "f"))[-2:] == ["StepFailed", "RunFailed"]
    assert (await replay(event_log, "f")).status == RunStatus.FAILED  # replays as it ran
    broken["yes"] = False  # the fixed reducer
    async with Runtime(event_log, workflows=[wf], config=config("b")) as rt:
        with pytest.raises(RunNotWaitingError, match="retry"):
            await rt.resume("f", True)
        await rt.retry("f")
        done = await run_to_rest(rt, "f")
    assert done.status == RunStatus.COMPLETED
    assert sorted(done.values["hits"]) == ["left", "right"]
    assert calls.count == {"left": 1, "right": 1}  # finished branches kept their writes
    assert "RunRetried" in await types_of(event_log, "f")


async def test_retry_continues_a_failed_run_from_its_last_commit(event_log: EventLog) -> None:
    calls = Calls()
    flaky = {"fail": True}
    wf = Workflow("pipeline", state={"a": "replace", "b": "replace"}, retry=FAST_RETRY)

    @wf.step(then="second")
    async def first(ctx: StepContext) -> Any:
        return {"a": await ctx.task("paid", lambda: calls.hit("paid"))}

    @wf.step
    async def second(ctx: StepContext) -> Any:
        calls.hit("second")
        if flaky["fail"]:
            raise RuntimeError("the model is down")
        return end(b=2)

    async with Runtime(event_log, workflows=[wf], config=config("a")) as rt:
        await rt.start(wf, run_id="r", durability="sync")
        assert (await run_to_rest(rt, "r")).status == RunStatus.FAILED
        flaky["fail"] = False
        await rt.retry("r")
        done = await run_to_rest(rt, "r")
        with pytest.raises(RunNotFailedError, match="finished"):
            await rt.retry("r")
    assert done.status == RunStatus.COMPLETED and done.values == {"a": 1, "b": 2}
    assert calls.count["paid"] == 1 and calls.count["second"] == 4  # 3 tries, then 1


# -- item 10: a failed snapshot save is not a failed run ----------------------------------


class SnapshotsFail(MemoryEventLog):
    def __init__(self) -> None:
        super().__init__()
        self.tries = 0

    async def save_snapshot(self, snapshot: Snapshot) -> None:
        self.tries += 1
        raise BackendUnavailableError("injected: record larger than the broker's limit")


async def test_a_failed_snapshot_save_does_not_stop_the_run() -> None:
    log = SnapshotsFail()
    wf = Workflow("snap", state={"n": "replace"})

    @wf.step
    async def count(ctx: StepContext) -> Any:
        n = ctx.state.get("n", 0) + 1
        return end(n=n) if n >= 30 else goto("count", n=n)

    cfg = config(snapshots=SnapshotPolicy(every=10))
    async with Runtime(log, workflows=[wf], config=cfg) as rt:
        await rt.start(wf, run_id="s", durability="sync")
        assert (await run_to_rest(rt, "s")).values == {"n": 30}
    assert log.tries >= 2  # tried again later


# -- item 11: waiting on a run that nothing drives ---------------------------------------


async def test_wait_says_when_no_live_writer_drives_a_run(event_log: EventLog) -> None:
    gate = asyncio.Event()
    wf = Workflow("stuck", state={"x": "replace"})

    @wf.step
    async def work(ctx: StepContext) -> Any:
        await gate.wait()
        return end(x=1)

    dead = Runtime(event_log, workflows=[wf], config=config("dead"))
    await dead.start(wf, run_id="w", durability="sync")
    task = dead.driver.active_task("w")
    assert task is not None
    task.cancel()  # the writer stops mid-step
    await asyncio.gather(task, return_exceptions=True)
    # a crashed writer's lease: still live for a while, then gone
    epoch = await event_log.claim_writer("w", owner="crashed", lease_seconds=300)
    async with Runtime(event_log, workflows=[wf], config=config("new")) as rt:
        await rt.start(wf, run_id="w")  # within the lease: returns the existing run
        with pytest.raises(TimeoutError):
            await rt.wait("w", timeout=0.01)
        await event_log.release_lease("w", epoch)  # as if it had run out
        with pytest.raises(NoLiveWriterError, match="recover"):
            await rt.wait("w", timeout=30)
        gate.set()
        assert (await rt.recover()).recovered == ["w"]
        assert (await rt.wait("w", timeout=30)).status == RunStatus.COMPLETED


# -- items 12 and 22: definitions and routes ---------------------------------------------


async def test_routing_to_one_step_several_times_is_an_error(event_log: EventLog) -> None:
    wf = Workflow("dup", state={"x": "replace"})

    @wf.step
    async def fan(ctx: StepContext) -> Any:
        return goto("s", "s", "s")

    @wf.step
    async def s(ctx: StepContext) -> Any:
        return end(x=1)

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="g", durability="sync")
        with pytest.raises(RunFailedError, match=r"InvalidRouteError: .*only once per superstep"):
            await rt.wait("g", timeout=20)
    with pytest.raises(WorkflowDefinitionError, match="name each step once"):

        @wf.step(then=["s", "s"])
        async def other(ctx: StepContext) -> Any:
            return None


def test_a_sync_step_is_refused_when_defined() -> None:
    wf = Workflow("sync", state={"x": "replace"})
    with pytest.raises(WorkflowDefinitionError, match="async def"):

        @wf.step  # type: ignore[arg-type]
        def blocking(ctx: StepContext) -> Any:
            return None

    with pytest.raises(WorkflowDefinitionError, match="max_steps"):
        Workflow("zero", max_steps=0)


# -- item 13: log context stays with its run ---------------------------------------------


async def test_run_context_never_leaks_into_the_callers_log_context(event_log: EventLog) -> None:
    wf = _one_step("ctx")
    structlog.contextvars.clear_contextvars()
    with capture_logs() as logs:
        async with Runtime(event_log, workflows=[wf], config=config()) as rt:
            await rt.start(wf, run_id="p", durability="sync")
            await run_to_rest(rt, "p")
            structlog.get_logger("caller").info("unrelated line")
    assert structlog.contextvars.get_contextvars() == {}
    unrelated = next(line for line in logs if line["event"] == "unrelated line")
    assert "seq" not in unrelated and "run_id" not in unrelated
    parked = next(line for line in logs if line["event"] == "run parks on interrupt")
    assert parked["run_id"] == "p"
