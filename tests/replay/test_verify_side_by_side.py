"""The replay check on steps that run tasks side by side (memory and SQLite).

A recorded result returns at once in a replay, so tasks a step runs side by
side (``ctx.gather``, a plain ``asyncio.gather``) emit their events in
another interleaving than the one recorded: the first call finishes before
its sibling starts. Each test records a real run whose interleaving the
tasks force with events (no timing), checks that the unchanged code verifies
clean, and that a real change (a reordered, renamed, dropped or added task, a
changed write) still diverges where it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import pytest
from structlog.testing import capture_logs

from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import Event, RunStatus
from agentlog.replay import verify_history, verify_runs
from agentlog.runtime import RetryPolicy, Runtime, StepContext, Workflow, end, goto, task
from agentlog.runtime._workflow import Next
from tests.support.runtime import FAST_RETRY, config, event_log, events_of, run_to_rest

__all__ = ["event_log"]


async def _verdict(wf: Workflow, events: list[Event]) -> list[tuple[int, str]]:
    return [(d.seq, d.kind) for d in await verify_history(wf, events)]


def _seqs(events: list[Event], event_type: str) -> list[int]:
    return [e.seq for e in events if e.type == event_type]


def _tasks(events: list[Event]) -> list[tuple[str, str]]:
    """The task events in recorded order: (type, task name), outcomes named by their key."""
    names = {e.data.key: e.data.name for e in events if e.type == "TaskStarted"}  # type: ignore[attr-defined]
    return [
        (e.type, names[e.data.key])  # type: ignore[attr-defined]
        for e in events
        if e.type in ("TaskStarted", "TaskCompleted", "TaskFailed")
    ]


async def _record(log: EventLog, wf: Workflow, run_id: str = "r") -> list[Event]:
    async with Runtime(log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id=run_id, durability="sync")
        assert (await run_to_rest(rt, run_id)).status == RunStatus.COMPLETED
    return await events_of(log, run_id)


def _together(ctx: StepContext, combine: str, calls: list[Awaitable[Any]]) -> Awaitable[Any]:
    return ctx.gather(*calls) if combine == "ctx" else asyncio.gather(*calls)


def pair_flow(combine: str, *, change: str = "") -> Workflow:
    """research runs a and b side by side (b finishes first) -> wrap runs fin."""
    wf = Workflow("pair-flow", state={"notes": "append", "out": "replace"})
    b_done = asyncio.Event()

    async def slow_a() -> str:
        await b_done.wait()  # recorded: a starts, b starts, b ends, a ends
        return "from a"

    async def quick_b() -> str:
        b_done.set()
        return "from b"

    @wf.step
    async def research(ctx: StepContext) -> Next:
        names = {"swapped": "ba", "renamed": "ac", "dropped": "a", "added": "abc"}
        calls = {"a": (slow_a,), "b": (quick_b,), "c": (quick_b,)}
        order = names.get(change, "ab")
        found = await _together(ctx, combine, [ctx.task(n, *calls[n]) for n in order])
        notes = sorted(found) + (["more"] if change == "write" else [])
        return goto("wrap", notes=notes)

    @wf.step
    async def wrap(ctx: StepContext) -> Next:
        return end(out=await ctx.task("fin", _value, "|".join(ctx.state["notes"])))

    return wf


async def _value(v: Any) -> Any:
    return v


@pytest.mark.parametrize("combine", ["ctx", "plain"], ids=["ctx.gather", "asyncio.gather"])
async def test_tasks_side_by_side_verify_clean_and_changes_still_diverge(
    event_log: EventLog, combine: str
) -> None:
    events = await _record(event_log, pair_flow(combine))
    assert _tasks(events)[:4] == [
        ("TaskStarted", "a"),
        ("TaskStarted", "b"),
        ("TaskCompleted", "b"),
        ("TaskCompleted", "a"),
    ]
    assert await _verdict(pair_flow(combine), events) == []
    report = await verify_runs(event_log, [pair_flow(combine)], runs="all")
    assert report.ok and report.matched == 1
    start_a, start_b = _seqs(events, "TaskStarted")[:2]
    research = _seqs(events, "StepCompleted")[0]
    assert await _verdict(pair_flow(combine, change="swapped"), events) == [(start_a, "task")]
    assert await _verdict(pair_flow(combine, change="renamed"), events) == [(start_b, "task")]
    assert await _verdict(pair_flow(combine, change="dropped"), events) == [(start_b, "task")]
    assert await _verdict(pair_flow(combine, change="added"), events) == [(research, "task")]
    assert await _verdict(pair_flow(combine, change="write"), events) == [(research, "write")]


async def test_a_reordered_call_names_what_the_history_has(event_log: EventLog) -> None:
    events = await _record(event_log, pair_flow("ctx"))
    [swapped] = await verify_history(pair_flow("ctx", change="swapped"), events)
    assert (swapped.expected, swapped.got) == ("task 'a' (call 0)", "task 'b' (call 0)")
    [renamed] = await verify_history(pair_flow("ctx", change="renamed"), events)
    assert (renamed.expected, renamed.got) == ("task 'b' (call 0)", "task 'c' (call 0)")


def chains_flow(*, change: str = "") -> Workflow:
    """Two chains side by side: (a then c) and (b). Recorded: a, b start; a
    ends; c starts and ends; b ends. A replay runs the first chain to its end
    before b starts: c is called before b, with a call of its own chain (a)
    in flight when the history called b."""
    wf = Workflow("chains-flow", state={"out": "replace"})
    b_started, c_done = asyncio.Event(), asyncio.Event()

    async def a() -> str:
        await b_started.wait()
        return "a"

    async def b() -> str:
        b_started.set()
        await c_done.wait()
        return "b"

    async def c() -> str:
        c_done.set()
        return "c"

    @wf.step
    async def only(ctx: StepContext) -> Next:
        async def first_chain() -> str:
            if change == "reordered":  # c before a: the history called a first
                return await ctx.task("c", c) + await ctx.task("a", a)
            return await ctx.task("a", a) + await ctx.task("c", c)

        found = await ctx.gather(first_chain(), ctx.task("b", b))
        return end(out="".join(found))

    return wf


async def test_chains_side_by_side_verify_clean_and_a_reordered_chain_diverges(
    event_log: EventLog,
) -> None:
    events = await _record(event_log, chains_flow())
    assert _tasks(events) == [
        ("TaskStarted", "a"),
        ("TaskStarted", "b"),
        ("TaskCompleted", "a"),
        ("TaskStarted", "c"),
        ("TaskCompleted", "c"),
        ("TaskCompleted", "b"),
    ]
    assert await _verdict(chains_flow(), events) == []
    start_a = _seqs(events, "TaskStarted")[0]
    assert await _verdict(chains_flow(change="reordered"), events) == [(start_a, "task")]


def retried_flow(*, change: str = "") -> Workflow:
    """a (fails its first try, retried by its policy) and b side by side; the
    step itself fails its first attempt after both, and is retried."""
    wf = Workflow("retried-flow", state={"out": "replace"}, retry=FAST_RETRY)
    b_started, a_done = asyncio.Event(), asyncio.Event()
    tries = {"a": 0}

    @task(name="a", retry=RetryPolicy(max_attempts=3, initial_interval=0.001))
    async def flaky_a() -> str:
        tries["a"] += 1
        await b_started.wait()
        if tries["a"] == 1:
            raise ConnectionError("the service flaked")
        a_done.set()
        return "a"

    @task(name="b")
    async def b() -> str:
        b_started.set()
        await a_done.wait()
        return "b"

    @wf.step
    async def only(ctx: StepContext) -> Next:
        found = await ctx.gather(flaky_a(), b())
        if ctx.attempt == 1:
            raise RuntimeError("the step flaked")
        return end(out="".join(found) + ("!" if change == "write" else ""))

    return wf


async def test_a_retried_task_side_by_side_verifies_clean_and_quietly(
    event_log: EventLog,
) -> None:
    events = await _record(event_log, retried_flow())
    assert _tasks(events) == [
        ("TaskStarted", "a"),
        ("TaskStarted", "b"),
        ("TaskFailed", "a"),
        ("TaskStarted", "a"),
        ("TaskCompleted", "a"),
        ("TaskCompleted", "b"),
    ]
    assert "StepFailed" in {e.type for e in events}
    with capture_logs() as logs:
        assert await _verdict(retried_flow(), events) == []
    # The recorded failures are replayed, not news: nothing above debug.
    assert [entry for entry in logs if entry["log_level"] != "debug"] == []
    assert "step failed" in {entry["event"] for entry in logs}
    last = _seqs(events, "StepCompleted")[-1]
    assert await _verdict(retried_flow(change="write"), events) == [(last, "write")]
