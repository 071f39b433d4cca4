"""The timeline model: steps, parallel lanes, task bars, failure/retry/interrupt marks."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

from agentlog.eventlog import (
    Event,
    InterruptRaised,
    RunFailed,
    RunStarted,
    StepCompleted,
    StepFailed,
    SuperstepCommitted,
)
from agentlog.eventlog.events import TimerFired
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.replay import TimelineBuilder, build_timeline
from agentlog.runtime import Runtime
from tests.replay.workflows import CALLS, debug_workflow


async def recorded_run() -> list[Event]:
    """The debug workflow, parked on its interrupt and then answered."""
    CALLS["flaky"] = 0
    log = MemoryEventLog()
    async with asyncio.timeout(30), Runtime(log, workflows=[debug_workflow()]) as rt:
        await rt.start("debug", run_id="r", durability="sync")
        assert (await rt.wait("r")).status == "waiting"
        await rt.resume("r", "yes")
        assert (await rt.wait("r")).status == "completed"
    return [e async for e in log.read("r")]


async def test_timeline_of_parallel_tasks_a_retry_and_an_interrupt() -> None:
    events = await recorded_run()
    model = build_timeline(events).to_json()
    assert json.loads(json.dumps(model)) == model  # plain JSON values only
    assert model["status"] == "completed" and model["last_seq"] == events[-1].seq

    steps = model["steps"]
    assert [s["superstep"] for s in steps] == [0, 1, 2]
    assert [[lane["step"] for lane in s["lanes"]] for s in steps] == [
        ["fan"],
        ["fetch", "ask"],  # parallel branches, side by side
        ["finish"],
    ]
    fetch, ask = steps[1]["lanes"]
    assert fetch["status"] == "ok" and ask["status"] == "ok"
    assert fetch["tracks"] == 2  # the two tasks ran at the same time
    bars = {bar["task"]: bar for bar in fetch["bars"]}
    assert sorted(bars) == ["flaky", "slow"]
    assert {bar["track"] for bar in bars.values()} == {0, 1}
    assert bars["slow"]["status"] == "ok" and bars["slow"]["attempts"] == 1
    assert bars["flaky"]["status"] == "retried" and bars["flaky"]["attempts"] == 2
    assert "flaky service" in bars["flaky"]["error"]
    for bar in bars.values():
        assert bar["duration_ms"] is not None and bar["duration_ms"] >= 0
    assert ask["bars"] == []

    kinds = [m["kind"] for m in model["marks"]]
    assert sorted(kinds) == ["interrupt", "retry", "task_failed"]
    interrupt = next(m for m in model["marks"] if m["kind"] == "interrupt")
    assert interrupt["step"] == "ask" and interrupt["answered"] is True
    assert interrupt["answered_by"] == "resume" and interrupt["waited_ms"] >= 0
    assert interrupt["answered_seq"] > interrupt["seq"]
    assert model["counts"] == {
        "steps": 3,
        "lanes": 4,
        "bars": 2,
        "marks": 3,
        "interrupt": 1,
        "retry": 1,
        "task_failed": 1,
    }
    window = build_timeline(events).to_json(first_step=1, max_steps=1)
    assert [s["superstep"] for s in window["steps"]] == [1]
    assert len(window["marks"]) == 3 and window["counts"] == model["counts"]
    assert build_timeline(events).to_json(first_step=2)["marks"] == []


async def test_an_unanswered_interrupt_leaves_its_lane_waiting() -> None:
    events = await recorded_run()
    parked = [e for e in events if e.type != "ResumeReceived"]
    parked = parked[: next(i for i, e in enumerate(parked) if e.type == "WriterClaimed")]
    model = build_timeline(parked).to_json()
    lanes = {lane["step"]: lane for lane in model["steps"][1]["lanes"]}
    assert lanes["ask"]["status"] == "waiting" and lanes["ask"]["end"] is None
    interrupt = next(m for m in model["marks"] if m["kind"] == "interrupt")
    assert interrupt["answered"] is False and interrupt["waited_ms"] is None


async def test_the_builder_extends_event_by_event_to_the_same_model() -> None:
    events = await recorded_run()
    builder = TimelineBuilder()
    for event in events[:7]:
        builder.add(event)
    builder.timeline.to_json()  # a live view draws it midway
    for event in events[7:]:
        builder.add(event)
    assert builder.timeline.to_json() == build_timeline(events).to_json()


def test_step_retries_timers_and_a_failed_run_are_marked() -> None:
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    data = [
        RunStarted("w", "1", {}, "sync", "fp", {}, ["a"]),
        StepFailed("a", 0, 0, 1, "ValueError: no"),
        StepCompleted("a", 0, 0, {}, ["b"]),
        SuperstepCommitted(0, ["b"]),
        InterruptRaised("b", 1, 0, 0, None, due_at=t0 + timedelta(hours=1), kind="timer"),
        TimerFired(["1:0:0"]),
        StepFailed("b", 1, 0, 1, "RuntimeError: gone", retryable=False),
        RunFailed("RuntimeError: gone"),
    ]
    events = [Event("r", i, d, ts=t0 + timedelta(seconds=i)) for i, d in enumerate(data, 1)]
    model = build_timeline(events).to_json()
    a = model["steps"][0]["lanes"][0]
    b = model["steps"][1]["lanes"][0]
    assert (a["status"], a["attempts"]) == ("retried", 2)
    assert (b["status"], b["attempts"]) == ("failed", 1)
    marks = {m["kind"]: m for m in model["marks"]}
    assert sorted(marks) == ["run_failed", "step_failed", "timer"]
    assert marks["timer"]["answered_by"] == "timer" and marks["timer"]["waited_ms"] == 1000.0
    assert marks["run_failed"]["text"] == "RuntimeError: gone"
    assert model["counts"]["step_failed"] == 2 and model["status"] == "failed"
