"""The timeline model: steps, parallel lanes, task bars, failure/retry/interrupt marks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
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
from agentlog.replay._timeline_window import CHUNK, TimelineWindows
from agentlog.runtime import Runtime
from tests.replay.workflows import CALLS, debug_workflow, recorded_rounds, restricted


class CountingLog(MemoryEventLog):
    """The in-memory log, counting the events its readers are given."""

    read_events = 0

    async def read(
        self, run_id: str, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> AsyncIterator[Event]:
        async for event in super().read(run_id, after_seq=after_seq, upto_seq=upto_seq):
            self.read_events += 1
            yield event


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
        "steps": 4,  # fan, fetch, ask, finish: as the run index counts them
        "supersteps": 3,
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


async def test_windows_are_the_full_model_cut_to_their_supersteps() -> None:
    log = MemoryEventLog()
    events = await recorded_rounds(log, rounds=12)
    full = build_timeline(events)
    kinds = full.counts()
    # the run has what a window must not lose at its edges
    assert kinds["retry"] >= 6 and kinds["interrupt"] == 4 and kinds["run_retried"] == 1
    assert kinds["step_failed"] == 2 and max(len(b.lanes) for b in full.steps.values()) == 2
    total, last_seq = len(full.steps), events[-1].seq
    for chunk in (1, 5, 64, CHUNK):
        for steps in (1, 3, 7, total + 2):
            windows = TimelineWindows(log, "rounds", chunk=chunk)
            latest = await windows.latest(steps, last_seq, full.steps_done)
            first = max(0, total - steps)
            assert latest == restricted(full, first, steps, latest), (chunk, steps)
            assert [s["superstep"] for s in latest["steps"]] == list(range(first, total))
            # paging back a window at a time, then jumping about (past the end too)
            for start in [*range(first - steps, 0, -steps), 0, 2, total - 1, total + 5, 1]:
                window = await windows.window(start, steps, last_seq, full.steps_done)
                assert window == restricted(full, start, steps, window), (chunk, steps, start)


async def test_the_latest_window_reads_only_its_own_events() -> None:
    log = CountingLog()
    events = await recorded_rounds(log, rounds=30)
    total = len(build_timeline(events).steps)
    windows = TimelineWindows(log, "rounds", chunk=16)
    log.read_events = 0
    latest = await windows.latest(3, events[-1].seq)
    assert [s["superstep"] for s in latest["steps"]] == list(range(total - 3, total))
    assert latest["counts"]["supersteps"] == total and latest["counts_scope"] == "window"
    # the last three supersteps' events, one chunk before them, and seq 1 (the run's start)
    opened = next(
        e.seq
        for e in events
        if isinstance(e.data, SuperstepCommitted) and e.data.superstep == total - 4
    )
    assert log.read_events <= len(events) - opened + 1 + 16 + 1 < len(events) // 2
    log.read_events = 0
    back = await windows.window(total - 6, 3, events[-1].seq)
    assert [s["superstep"] for s in back["steps"]] == list(range(total - 6, total - 3))
    assert log.read_events < len(events) // 4


async def test_a_kept_window_follows_a_live_run() -> None:
    recorded = await recorded_rounds(MemoryEventLog(), rounds=9)
    log = MemoryEventLog()
    epoch = await log.claim_writer("rounds")
    live = [Event(e.run_id, e.seq, e.data, ts=e.ts, writer_epoch=epoch) for e in recorded]
    windows = TimelineWindows(log, "rounds", chunk=4)
    done = 0
    for upto in [*range(5, len(live), 11), len(live)]:
        await log.append(live[done:upto], durable=False)
        done = upto
        full = build_timeline(live[:upto])
        for steps in (2, 4):
            first = max(0, len(full.steps) - steps)
            kept = await windows.latest(
                steps, upto, full.steps_done
            )  # extended with the new events
            assert kept == restricted(full, first, steps, kept), (upto, steps)
            fresh = await TimelineWindows(log, "rounds", chunk=4).latest(
                steps, upto, full.steps_done
            )
            assert fresh == restricted(full, first, steps, fresh), (upto, steps)
