"""The replay check on every history shape the real runtime produces (memory and SQLite).

Each test drives real runs (a real in-process crash and ``recover()``, a task
tried again, a step tried again, an interrupt answered, a timer fired, a run
retried, a cancel, a migration, forks) and checks two things: the unchanged
code verifies clean, and code with one real change still diverges there, so
the shape is understood, not skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from structlog.testing import capture_logs

from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import Event, RunStatus
from agentlog.replay import verify_history, verify_runs
from agentlog.runtime import RetryPolicy, Runtime, StepContext, Workflow, end, goto, task
from agentlog.runtime._workflow import Next
from tests.support.runtime import FAST_RETRY, Gate, config, event_log, events_of, run_to_rest

__all__ = ["event_log"]

RETRY = RetryPolicy(max_attempts=3, initial_interval=0.001, backoff_coefficient=1.0)


async def _verdict(wf: Workflow, events: list[Event]) -> list[tuple[int, str]]:
    return [(d.seq, d.kind) for d in await verify_history(wf, events)]


def _seq(events: list[Event], event_type: str, nth: int = 1) -> int:
    return [e.seq for e in events if e.type == event_type][nth - 1]


async def _crashed_and_recovered(
    log: EventLog, wf: Workflow, gate: Gate, run_id: str = "r"
) -> list[Event]:
    """Start ``wf``, crash the process while a task waits on ``gate`` (the runtime
    is closed with the task in flight), recover it in a new runtime, finish it."""
    rt = Runtime(log, workflows=[wf], config=config("first"))
    await rt.start(wf, run_id=run_id, durability="sync")
    await gate.reached.wait()
    await rt.close()  # the run's task is cancelled mid-effect: a crash
    gate.release.set()
    async with Runtime(log, workflows=[wf], config=config("second")) as again:
        assert (await again.recover()).recovered == [run_id]
        assert (await run_to_rest(again, run_id)).status == RunStatus.COMPLETED
    return await events_of(log, run_id)


def crash_flow(gate: Gate, *, change: str = "") -> Workflow:
    """first (prep, slow: in flight at the crash) -> second (fin)."""
    wf = Workflow("crash-flow", state={"x": "replace", "y": "replace"})

    async def slow() -> int:
        if not gate.release.is_set():
            await gate.pass_through()
        return 2

    @wf.step
    async def first(ctx: StepContext) -> Next:
        a = await ctx.task("prep", _value, 1)
        b = await ctx.task("slow" if change != "renamed" else "slower", slow)
        return goto("second", x=a + b)

    @wf.step
    async def second(ctx: StepContext) -> Next:
        y = await ctx.task("fin", _value, ctx.state["x"])
        return end(y=y + (1 if change == "write" else 0))

    return wf


async def _value(v: Any) -> Any:
    return v


async def test_a_task_in_flight_at_a_crash_verifies_clean(event_log: EventLog) -> None:
    gate = Gate()
    events = await _crashed_and_recovered(event_log, crash_flow(gate), gate)
    types = [e.type for e in events]
    restart = types.index("WriterClaimed")
    assert types[restart - 1 : restart + 3] == [
        "TaskStarted",
        "WriterClaimed",
        "TaskStarted",
        "TaskCompleted",
    ]
    assert await _verdict(crash_flow(gate), events) == []
    report = await verify_runs(event_log, [crash_flow(gate)], runs="all")
    assert report.ok and report.matched == 1
    # The task in flight, renamed: the first try of it already differs.
    renamed = _seq(events, "TaskStarted", 2)
    assert await _verdict(crash_flow(gate, change="renamed"), events) == [(renamed, "task")]
    last_write = _seq(events, "StepCompleted", 2)
    assert await _verdict(crash_flow(gate, change="write"), events) == [(last_write, "write")]


def fan_flow(gate: Gate, *, change: str = "") -> Workflow:
    """split -> (quick | slow: in flight at the crash) -> join."""
    wf = Workflow("fan-flow", state={"notes": "append", "topic": "replace", "out": "replace"})

    async def slow() -> str:
        if not gate.release.is_set():
            await gate.pass_through()
        return "slow"

    @wf.step
    async def split(ctx: StepContext) -> Next:
        return goto("quick", "slowly", topic=ctx.state.get("topic") or "cats")

    @wf.step(then="join")
    async def quick(ctx: StepContext) -> dict[str, Any]:
        return {"notes": [await ctx.task("quick", _value, f"quick on {ctx.state['topic']}")]}

    @wf.step(then="join")
    async def slowly(ctx: StepContext) -> dict[str, Any]:
        first = await ctx.task("before", _value, ctx.state["topic"])
        return {"notes": [first, await ctx.task("slow", slow)]}

    @wf.step
    async def join(ctx: StepContext) -> Next:
        notes = sorted(ctx.state["notes"]) + (["more"] if change == "write" else [])
        return end(out="|".join(notes))

    return wf


async def test_a_crash_in_a_parallel_superstep_verifies_clean(event_log: EventLog) -> None:
    gate = Gate()
    events = await _crashed_and_recovered(event_log, fan_flow(gate), gate)
    claim = _seq(events, "WriterClaimed")
    # The quick branch finished before the crash: its writes are kept, it does not run again.
    assert [e.type for e in events[:claim]].count("StepCompleted") == 2
    assert await _verdict(fan_flow(gate), events) == []
    join = _seq(events, "StepCompleted", 4)
    assert await _verdict(fan_flow(gate, change="write"), events) == [(join, "write")]


async def test_forks_with_updates_at_every_seq_of_a_crashed_parallel_run_verify_clean(
    event_log: EventLog,
) -> None:
    gate = Gate()
    origin = await _crashed_and_recovered(event_log, fan_flow(gate), gate)
    bare = [e.seq for e in origin if e.type == "TaskStarted"]
    async with Runtime(event_log, workflows=[fan_flow(gate)], config=config()) as rt:
        for seq in range(1, len(origin) + 1):
            fork = f"fork-{seq}"
            await rt.fork("r", seq, new_run_id=fork, updates={"topic": f"dogs{seq}"})
            assert (await run_to_rest(rt, fork)).status == RunStatus.COMPLETED
            events = await events_of(event_log, fork)
            assert await _verdict(fan_flow(gate), events) == [], seq
            if seq in bare or seq == 1:  # a bare TaskStarted; the start: every step runs
                changed = await _verdict(fan_flow(gate, change="write"), events)
                assert [kind for _, kind in changed] == ["write"], seq


def retry_flow(*, change: str = "") -> Workflow:
    """A task that fails its first try (its own retry policy); a step that fails its first try."""
    wf = Workflow("retry-flow", state={"x": "replace", "y": "replace"}, retry=FAST_RETRY)
    tries = {"flaky": 0}

    @task(name="flaky", retry=RETRY)
    async def flaky() -> int:
        tries["flaky"] += 1
        if tries["flaky"] == 1:
            raise ConnectionError("the service flaked")
        return 5

    @wf.step
    async def first(ctx: StepContext) -> Next:
        return goto("second", x=await flaky())

    @wf.step
    async def second(ctx: StepContext) -> Next:
        y = await ctx.task("fin", _value, ctx.state["x"])
        if ctx.attempt == 1:
            raise RuntimeError("the step flaked")
        return end(y=y * (3 if change == "write" else 2))

    return wf


async def test_a_task_retried_and_a_step_retried_verify_clean(event_log: EventLog) -> None:
    async with Runtime(event_log, workflows=[retry_flow()], config=config()) as rt:
        await rt.start(retry_flow(), run_id="r", durability="async")
        assert (await run_to_rest(rt, "r")).status == RunStatus.COMPLETED
    events = await events_of(event_log, "r")
    types = [e.type for e in events]
    assert types[1:5] == ["TaskStarted", "TaskFailed", "TaskStarted", "TaskCompleted"]
    assert "StepFailed" in types
    assert await _verdict(retry_flow(), events) == []
    last = _seq(events, "StepCompleted", 2)
    assert await _verdict(retry_flow(change="write"), events) == [(last, "write")]


async def test_replayed_failures_log_nothing_above_debug(event_log: EventLog) -> None:
    """A task that failed and a step that failed are the history's: a healthy
    check retells them at debug, never as warnings."""
    async with Runtime(event_log, workflows=[retry_flow()], config=config()) as rt:
        await rt.start(retry_flow(), run_id="r", durability="sync")
        assert (await run_to_rest(rt, "r")).status == RunStatus.COMPLETED
    events = await events_of(event_log, "r")
    assert {"TaskFailed", "StepFailed"} <= {e.type for e in events}
    with capture_logs() as logs:
        assert await _verdict(retry_flow(), events) == []
    assert [entry for entry in logs if entry["log_level"] != "debug"] == []
    assert "step failed" in {entry["event"] for entry in logs}


def parked_flow(*, change: str = "", version: str = "1") -> Workflow:
    """nap (a durable timer) -> ask (an interrupt) -> fin."""
    wf = Workflow("parked-flow", version=version, state={"x": "replace", "answer": "replace"})

    @wf.step
    async def nap(ctx: StepContext) -> Next:
        x = await ctx.task("before", _value, 1)
        await ctx.sleep(0)
        return goto("ask", x=x)

    @wf.step
    async def ask(ctx: StepContext) -> Next:
        answer = ctx.interrupt({"x": ctx.state["x"]})
        return goto("fin", answer=answer)

    @wf.step
    async def fin(ctx: StepContext) -> Next:
        done = await ctx.task("fin", _value, ctx.state["answer"])
        return end(x=done if change != "write" else f"{done}!")

    return wf


async def test_a_timer_and_an_interrupt_answered_verify_clean(event_log: EventLog) -> None:
    wf = parked_flow()
    # The worker fires the timer; the run then parks on its interrupt.
    async with Runtime(event_log, workflows=[wf], config=config(worker=True)) as rt:
        await rt.start(wf, run_id="r", durability="exit")
        assert (await run_to_rest(rt, "r")).status == RunStatus.WAITING
        await rt.resume("r", "yes")
        assert (await run_to_rest(rt, "r")).status == RunStatus.COMPLETED
    events = await events_of(event_log, "r")
    assert {"TimerFired", "ResumeReceived"} <= {e.type for e in events}
    assert await _verdict(parked_flow(), events) == []
    last = _seq(events, "StepCompleted", 3)
    assert await _verdict(parked_flow(change="write"), events) == [(last, "write")]


async def test_a_run_migrated_while_parked_is_checked_from_its_migration_on(
    event_log: EventLog,
) -> None:
    old = parked_flow()
    async with Runtime(event_log, workflows=[old], config=config(worker=True)) as rt:
        await rt.start(old, run_id="r", durability="sync")
        assert (await run_to_rest(rt, "r")).status == RunStatus.WAITING

    def new(change: str = "") -> Workflow:
        wf = parked_flow(change=change, version="2")
        wf.migration("1")(lambda values: values)
        return wf

    async with Runtime(event_log, workflows=[new()], config=config()) as rt:
        await rt.resume("r", "yes")
        assert (await run_to_rest(rt, "r")).status == RunStatus.COMPLETED
    events = await events_of(event_log, "r")
    assert "RunMigrated" in {e.type for e in events}
    report = await verify_runs(event_log, [new()], runs="all")
    assert [(r.status, r.divergences) for r in report.runs] == [("matched", ())]
    assert "migrated to v2" in report.runs[0].note
    last = _seq(events, "StepCompleted", 3)
    assert await _verdict(new(change="write"), events) == [(last, "write")]


def failing_flow(broken: dict[str, bool], *, change: str = "") -> Workflow:
    """one step whose task fails (no retry) until it is fixed; the run is retried."""
    wf = Workflow("failing-flow", state={"x": "replace"})

    async def call() -> int:
        if broken["now"]:
            raise ValueError("the service is down")
        return 7

    @wf.step
    async def only(ctx: StepContext) -> Next:
        x = await ctx.task("call", call)
        return end(x=x + (1 if change == "write" else 0))

    return wf


async def test_a_failed_run_retried_verifies_clean(event_log: EventLog) -> None:
    broken = {"now": True}
    wf = failing_flow(broken)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="r", durability="sync")
        assert (await run_to_rest(rt, "r")).status == RunStatus.FAILED
        broken["now"] = False
        await rt.retry("r")
        assert (await run_to_rest(rt, "r")).status == RunStatus.COMPLETED
    events = await events_of(event_log, "r")
    assert "RunRetried" in {e.type for e in events}
    assert await _verdict(failing_flow(broken), events) == []
    last = _seq(events, "StepCompleted")
    assert await _verdict(failing_flow(broken, change="write"), events) == [(last, "write")]


async def test_a_run_cancelled_mid_task_verifies_clean(event_log: EventLog) -> None:
    """The cancel interrupts the step while its task is in flight: the task's
    intent is recorded, its outcome is not, and the run ends cancelled."""
    gate = Gate()
    wf = crash_flow(gate)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="r", durability="sync")
        await gate.reached.wait()
        assert (await rt.cancel("r")).status == RunStatus.CANCELLED
        gate.release.set()
    events = await events_of(event_log, "r")
    assert [e.type for e in events][-2:] == ["TaskStarted", "RunCancelled"]
    assert await _verdict(crash_flow(gate), events) == []
    slow = _seq(events, "TaskStarted", 2)
    assert await _verdict(crash_flow(gate, change="renamed"), events) == [(slow, "task")]


@pytest.mark.parametrize("make", [crash_flow, fan_flow], ids=["sequential", "parallel"])
async def test_a_history_cut_at_the_crash_is_an_open_run_that_matches(
    event_log: EventLog, make: Callable[..., Workflow]
) -> None:
    gate = Gate()
    events = await _crashed_and_recovered(event_log, make(gate), gate)
    claim = _seq(events, "WriterClaimed")
    for upto in range(1, len(events) + 1):  # every prefix: what a verify before the end saw
        assert await _verdict(make(gate), events[:upto]) == [], (claim, upto)
