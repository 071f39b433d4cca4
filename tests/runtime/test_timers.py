"""Durable timers: ``ctx.sleep``, ``ctx.sleep_until`` and ``interrupt(timeout=...)``.

A timer is an interrupt the clock answers. The run parks with no process;
a worker records TimerFired at the due time and the step runs again, its
earlier tasks returning their recorded results.
"""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentlog.errors import InterruptTimeoutError, InvalidTimerError, RunNotWaitingError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import InterruptRaised, RunStatus, utcnow
from agentlog.runtime import Runtime, StepContext, Workflow, end, goto
from tests.support.runtime import Calls, config, event_log, events_of, run_to_rest, types_of

__all__ = ["event_log"]


def sleeper(calls: Calls, seconds: float = 0.2) -> Workflow:
    wf = Workflow("sleeper", state={"before": "replace", "after": "replace"})

    @wf.step
    async def nap(ctx: StepContext) -> Any:
        calls.hit("nap")
        paid = await ctx.task("model", lambda: calls.hit("model"))
        await ctx.sleep(seconds)
        calls.hit("woke")
        return end(before=paid, after="awake")

    return wf


async def test_a_sleep_parks_the_run_and_the_worker_fires_it(event_log: EventLog) -> None:
    calls = Calls()
    wf = sleeper(calls)
    async with Runtime(event_log, workflows=[wf], config=config(worker=True)) as rt:
        handle = await rt.start(wf, run_id="s")
        state = await run_to_rest(rt, "s")  # wait goes on through the sleep
    assert state.status == RunStatus.COMPLETED
    assert state.values == {"before": 1, "after": "awake"}
    assert calls.count["model"] == 1  # the paid call before the sleep ran once
    assert calls.count["woke"] == 1
    types = await types_of(event_log, "s")
    assert types.count("InterruptRaised") == 1 and types.count("TimerFired") == 1
    assert (await event_log.get_run(handle.run_id)).wake_at is None


async def test_a_sleeping_run_needs_no_process_and_a_new_worker_fires_it(
    event_log: EventLog,
) -> None:
    calls = Calls()
    wf = sleeper(calls, seconds=0.3)
    async with Runtime(event_log, workflows=[wf], config=config("first")) as first:
        await first.start(wf, run_id="s")
        await _until_waiting(event_log, "s")  # parked on its timer; this process has no worker
    info = await event_log.get_run("s")
    assert info.wake_at is not None and info.lease_expires_at is None
    raised = [
        e.data for e in await events_of(event_log, "s") if isinstance(e.data, InterruptRaised)
    ]
    assert raised[0].kind == "timer" and raised[0].due_at == info.wake_at
    # A new process (a fresh runtime) whose worker fires the timer when it is due.
    async with Runtime(event_log, workflows=[wf], config=config("second", worker=True)) as second:
        state = await run_to_rest(second, "s")
    assert state.status == RunStatus.COMPLETED
    assert calls.count["model"] == 1 and calls.count["woke"] == 1
    assert (await types_of(event_log, "s")).count("TimerFired") == 1


async def _sleep_until(moment: datetime | None) -> None:
    await asyncio.sleep(max(0.0, ((moment or utcnow()) - utcnow()).total_seconds()) + 0.02)


async def test_an_interrupt_timeout_returns_the_default_or_raises(event_log: EventLog) -> None:
    wf = Workflow("asks", state={"answer": "replace", "path": "replace"})

    @wf.step
    async def ask(ctx: StepContext) -> Any:
        answer = ctx.interrupt("approve?", expects="bool", timeout=0.2, default="no answer")
        return goto("strict", answer=answer)

    @wf.step
    async def strict(ctx: StepContext) -> Any:
        try:
            ctx.interrupt("really?", timeout=timedelta(seconds=0.2))
        except InterruptTimeoutError as exc:
            return end(path=f"timed out: {exc.interrupt}")
        return end(path="answered")

    async with Runtime(event_log, workflows=[wf], config=config(worker=True)) as rt:
        await rt.start(wf, run_id="t")
        first = await run_to_rest(rt, "t")
        assert first.status == RunStatus.WAITING  # a human may still answer
        pending = await rt.pending("t")
        assert len(pending) == 1 and pending[0].timeout_at is not None
        # Nobody answers: the worker answers for the clock at the due time.
        while (await event_log.get_run("t")).status != RunStatus.COMPLETED:
            await _sleep_until((await event_log.get_run("t")).wake_at)
            rt.worker.wake.set()
            await run_to_rest(rt, "t")
        state = await rt.get_state("t")
    assert state.values == {"answer": "no answer", "path": "timed out: 1:0:0"}
    assert (await types_of(event_log, "t")).count("TimerFired") == 2


async def test_an_answer_before_the_timeout_wins_and_the_timer_never_fires(
    event_log: EventLog,
) -> None:
    wf = Workflow("quick", state={"answer": "replace"})

    @wf.step
    async def ask(ctx: StepContext) -> Any:
        return end(answer=ctx.interrupt("ok?", expects="bool", timeout=3600))

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="q")
        await run_to_rest(rt, "q")
        assert (await event_log.get_run("q")).wake_at is not None
        await rt.resume("q", True)
        state = await run_to_rest(rt, "q")
    assert state.values == {"answer": True}
    assert (await event_log.get_run("q")).wake_at is None
    assert "TimerFired" not in await types_of(event_log, "q")


async def test_resume_of_a_sleeping_run_says_it_sleeps_and_records_nothing(
    event_log: EventLog,
) -> None:
    wf = sleeper(Calls(), seconds=3600)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="z")
        await _until_waiting(event_log, "z")
        before = await types_of(event_log, "z")
        with pytest.raises(RunNotWaitingError, match="sleeps until"):
            await rt.resume("z", "wake up")
        assert await rt.pending("z") == []  # a sleep is not a question
        assert await types_of(event_log, "z") == before


async def _until_waiting(log: EventLog, run_id: str) -> None:
    async with asyncio.timeout(20):
        while True:  # started with async durability: its first events may still be on their way
            info = await log.find_run(run_id)
            if info is not None and info.status == RunStatus.WAITING and info.last_seq:
                return
            await asyncio.sleep(0.01)


@pytest.mark.parametrize(
    ("duration", "match"),
    [
        (-1, "finite number of seconds >= 0"),
        (math.nan, "finite"),
        (math.inf, "finite"),
        (20 * 365 * 86400, "more than 10 years"),
        (timedelta(days=-1), ">= 0"),
        ("10", "seconds"),
    ],
)
async def test_a_bad_sleep_is_a_typed_error_and_records_no_timer(
    event_log: EventLog, duration: Any, match: str
) -> None:
    wf = Workflow("bad", state={"x": "replace"})

    @wf.step
    async def nap(ctx: StepContext) -> Any:
        try:
            await ctx.sleep(duration)
        except InvalidTimerError as exc:
            return end(x=str(exc))
        return end(x="slept")

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="b")
        state = await run_to_rest(rt, "b")
    assert match in state.values["x"]
    assert "InterruptRaised" not in await types_of(event_log, "b")


async def test_sleep_until_refuses_a_naive_datetime(event_log: EventLog) -> None:
    wf = Workflow("naive", state={"x": "replace"})

    @wf.step
    async def nap(ctx: StepContext) -> Any:
        await ctx.sleep_until(datetime(2030, 1, 1))  # no tzinfo
        return end(x=1)

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="n")
        state = await run_to_rest(rt, "n")
    assert state.status == RunStatus.FAILED and "timezone-aware" in state.error


async def test_a_past_sleep_until_fires_at_once_and_keeps_its_due_time(
    event_log: EventLog,
) -> None:
    wf = Workflow("past", state={"x": "replace"})
    when = datetime(2020, 1, 1, tzinfo=UTC)

    @wf.step
    async def nap(ctx: StepContext) -> Any:
        await ctx.sleep_until(when)
        return end(x="done")

    async with Runtime(event_log, workflows=[wf], config=config(worker=True)) as rt:
        await rt.start(wf, run_id="p")
        assert (await run_to_rest(rt, "p")).values == {"x": "done"}
    raised = [
        e.data for e in await events_of(event_log, "p") if isinstance(e.data, InterruptRaised)
    ]
    assert [r.due_at for r in raised] == [when]


async def test_parallel_sleep_and_question_park_together_and_finish_apart(
    event_log: EventLog,
) -> None:
    calls = Calls()
    wf = Workflow("both", state={"log": "append"})

    @wf.step
    async def fork(ctx: StepContext) -> Any:
        return goto("nap", "ask")

    @wf.step(then="join")
    async def nap(ctx: StepContext) -> Any:
        calls.hit("nap")
        await ctx.sleep(0.2)
        return {"log": ["slept"]}

    @wf.step(then="join")
    async def ask(ctx: StepContext) -> Any:
        calls.hit("ask")
        return {"log": [ctx.interrupt("name?", expects="str")]}

    @wf.step
    async def join(ctx: StepContext) -> Any:
        return end()

    async with Runtime(event_log, workflows=[wf], config=config(worker=True)) as rt:
        await rt.start(wf, run_id="pb")
        parked = await run_to_rest(rt, "pb")  # parked for the human's answer
        assert parked.status == RunStatus.WAITING
        assert [p.payload for p in await rt.pending("pb")] == ["name?"]  # not the sleep
        await rt.resume("pb", "ada")  # one plain value: the only question
        state = await run_to_rest(rt, "pb")
    assert state.status == RunStatus.COMPLETED
    assert sorted(state.values["log"]) == ["ada", "slept"]
    assert (await types_of(event_log, "pb")).count("TimerFired") == 1
