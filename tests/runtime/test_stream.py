"""Streaming (issue 10, item 8): watchers follow a run live, in every mode, from any process.

Every test that checks liveness makes the run *wait for the watcher*: a step
publishes progress and cannot go on until the watcher received it. A stream
that only replayed history after the end would hang there, and the bounded
waits turn that into a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentlog.errors import ConfigError, NotSerializableError, UnknownRunError
from agentlog.eventlog._base import EventLog, RunInfo
from agentlog.eventlog.events import (
    Event,
    ProgressReported,
    RunMigrated,
    RunStarted,
    RunStatus,
    SuperstepCommitted,
)
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.projector import fold, load_state
from agentlog.runtime import (
    STREAM_MODES,
    Runtime,
    StepContext,
    StreamUpdate,
    Workflow,
    end,
    goto,
    stream,
)
from tests.support.runtime import config, event_log, events_of, run_to_rest
from tests.support.stream_driver import BOUND_SECONDS, streamed_workflow

__all__ = ["event_log"]

#: What the streamed workflow publishes: (step, branch, data), in order.
PROGRESS = [("plan", 0, {"pct": 50}), ("plan", 0, {"pct": 100}), ("left", 0, {"side": "left"})]

_UPDATE_TYPES = {"StepCompleted", "ProgressReported", "InterruptRaised"}


async def _collect(log: EventLog, run_id: str, mode: Any, **kwargs: Any) -> list[StreamUpdate]:
    """Every update of a stream until it ends (bounded)."""
    async with asyncio.timeout(BOUND_SECONDS):
        return [update async for update in stream(log, run_id, mode=mode, **kwargs)]


@contextlib.asynccontextmanager
async def _watchers(log: EventLog, run_id: str) -> AsyncIterator[dict[str, asyncio.Task[Any]]]:
    """One watcher task per mode; on the way out, none is left running or unretrieved."""
    tasks = {mode: asyncio.create_task(_collect(log, run_id, mode)) for mode in STREAM_MODES}
    try:
        yield tasks
    finally:
        for task in tasks.values():
            task.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)


async def _release_on_progress(log: EventLog, run_id: str, gate: asyncio.Event) -> int:
    """Watch the run's progress; open ``gate`` once the first progress arrives."""
    async with asyncio.timeout(BOUND_SECONDS):
        async for update in stream(log, run_id, mode="progress"):
            assert update.data == {"pct": 50}
            gate.set()
            return update.seq
    raise AssertionError("the run ended before its progress was streamed")


async def _check_against_history(
    log: EventLog, run_id: str, got: dict[str, list[StreamUpdate]]
) -> None:
    """Each mode yielded exactly what the recorded history says, in seq order."""
    history = await events_of(log, run_id)
    assert [u.event for u in got["events"]] == history  # every event, no gap, no duplicate
    assert [u.seq for u in got["events"]] == list(range(1, len(history) + 1))
    assert all(u.data == u.event.data.to_dict() for u in got["events"])

    updates = [e for e in history if e.type in _UPDATE_TYPES]
    assert [(u.seq, u.type) for u in got["updates"]] == [(e.seq, e.type) for e in updates]
    for update in got["updates"]:
        payload = update.event.data
        assert update.step == payload.step  # type: ignore[attr-defined]
        assert update.branch == payload.branch  # type: ignore[attr-defined]
        if isinstance(payload, ProgressReported):
            assert update.data == payload.data
        else:
            assert update.data == payload.writes  # type: ignore[attr-defined]

    progress = [e for e in history if isinstance(e.data, ProgressReported)]
    assert [(u.seq, u.data) for u in got["progress"]] == [(e.seq, e.data.data) for e in progress]

    changes = [e for e in history if isinstance(e.data, RunStarted | SuperstepCommitted)]
    assert [u.seq for u in got["values"]] == [e.seq for e in changes]
    for update in got["values"]:  # the values a replay folds at that seq
        assert update.data == (await load_state(log, run_id, at_seq=update.seq)).values


@pytest.mark.parametrize("durability", ["sync", "async"])
async def test_every_mode_follows_a_live_run_in_order(event_log: EventLog, durability: str) -> None:
    gate = asyncio.Event()
    wf = streamed_workflow(gate.wait)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="s", durability=durability)
        async with _watchers(event_log, "s") as watchers:
            # The run cannot go past its progress until a watcher saw it.
            await _release_on_progress(event_log, "s", gate)
            assert (await run_to_rest(rt, "s")).status == RunStatus.COMPLETED
            got = {mode: await watcher for mode, watcher in watchers.items()}
    await _check_against_history(event_log, "s", got)
    assert [(u.step, u.branch, u.data) for u in got["progress"]] == PROGRESS
    assert got["values"][-1].data == {"notes": ["plan", "left", "right"], "count": 3}
    assert got["events"][-1].type == "RunCompleted"


async def test_a_watcher_started_after_the_end_replays_the_run_and_ends(
    event_log: EventLog,
) -> None:
    wf = streamed_workflow()
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="done", durability="sync")
        await run_to_rest(rt, "done")
    got = {mode: await _collect(event_log, "done", mode) for mode in STREAM_MODES}
    await _check_against_history(event_log, "done", got)
    assert [(u.step, u.branch, u.data) for u in got["progress"]] == PROGRESS


async def test_after_seq_goes_on_where_a_watcher_stopped(event_log: EventLog) -> None:
    wf = streamed_workflow()
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="on", durability="sync")
        await run_to_rest(rt, "on")
    for mode in STREAM_MODES:
        whole = await _collect(event_log, "on", mode)
        cut = whole[len(whole) // 2].seq
        rest = await _collect(event_log, "on", mode, after_seq=cut)
        assert rest == [u for u in whole if u.seq > cut], mode
        # Past the end of a finished run: nothing more will come, so it ends.
        last = (await event_log.get_run("on")).last_seq
        assert await _collect(event_log, "on", mode, after_seq=last) == [], mode


def _asking_workflow(branches: int) -> Workflow:
    """Parks with one interrupt per branch, then ends with the answers."""
    wf = Workflow(f"ask{branches}", state={"answers": "append"})
    names = [f"ask_{i}" for i in range(branches)]

    @wf.step
    async def begin(ctx: StepContext) -> Any:
        return goto(*names)

    for name in names:

        async def ask(ctx: StepContext) -> Any:
            await ctx.progress({"asking": ctx.step})
            return {"answers": [ctx.interrupt(f"{ctx.step}?")]}

        wf.step(name=name, then="close")(ask)

    @wf.step
    async def close(ctx: StepContext) -> Any:
        return end()

    return wf


@pytest.mark.parametrize("branches", [1, 2])
async def test_until_park_ends_once_every_interrupt_of_the_park_is_yielded(
    event_log: EventLog, branches: int
) -> None:
    wf = _asking_workflow(branches)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="p", durability="sync")
        assert (await run_to_rest(rt, "p")).status == RunStatus.WAITING
        got = await _collect(event_log, "p", "updates", until="park")
    asked = [u for u in got if u.type == "InterruptRaised"]
    assert sorted(u.data for u in asked) == sorted(f"ask_{i}?" for i in range(branches))
    assert got[-1].type == "InterruptRaised"
    last = (await event_log.get_run("p")).last_seq
    assert got[-1].seq == last
    # A watcher that already saw the park ends at once.
    assert await _collect(event_log, "p", "events", until="park", after_seq=last) == []


async def test_a_watcher_follows_a_run_through_its_park_until_it_ends(
    event_log: EventLog,
) -> None:
    wf = _asking_workflow(1)
    asked = asyncio.Event()

    async def watch() -> list[StreamUpdate]:
        seen = []
        async for update in stream(event_log, "p", mode="updates"):
            seen.append(update)
            if update.type == "InterruptRaised":
                asked.set()
        return seen

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="p", durability="sync")
        async with asyncio.timeout(BOUND_SECONDS):
            watcher = asyncio.create_task(watch())
            await asked.wait()  # the watcher is parked with the run, not finished
            assert not watcher.done()
            await run_to_rest(rt, "p")  # parked: its writer let go of the run
            await rt.resume("p", "yes")
            got = await watcher
    types = [u.type for u in got]
    after_park = got[types.index("InterruptRaised") + 1 :]
    assert [(u.type, u.step) for u in after_park] == [
        ("ProgressReported", "ask_0"),  # the step runs again from its start
        ("StepCompleted", "ask_0"),
        ("StepCompleted", "close"),
    ]
    assert after_park[1].data == {"answers": ["yes"]}


@pytest.mark.parametrize("durability", ["sync", "async"])
async def test_handle_stream_folds_values_with_the_workflows_own_reducers(
    event_log: EventLog, durability: str
) -> None:
    def add(current: int | None, update: int) -> int:
        return (current or 0) + update

    wf = Workflow("adder", state={"total": add})

    @wf.step(then="again")
    async def once(ctx: StepContext) -> Any:
        return {"total": 2}

    @wf.step
    async def again(ctx: StepContext) -> Any:
        return end(total=3)

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        # In async mode nothing may be written yet when start returns: the
        # stream waits for the run its writer holds, it is not "unknown".
        run = await rt.start(wf, run_id="v", input={"total": 1}, durability=durability)
        async with asyncio.timeout(BOUND_SECONDS):
            values = [u.data async for u in run.stream("values")]
        assert values[-1] == await rt.result("v") == {"total": 6}
    assert [v["total"] for v in values] == [1, 3, 6]
    # Without the workflow's code, "add" is unknown and folds as "replace".
    plain = await _collect(event_log, "v", "values")
    assert plain[-1].data == {"total": 3}


async def test_progress_that_cannot_be_stored_raises_in_the_step_and_records_nothing(
    event_log: EventLog,
) -> None:
    wf = Workflow("badprogress", state={"caught": "replace"})

    @wf.step
    async def only(ctx: StepContext) -> Any:
        try:
            await ctx.progress({"handle": object()})
        except NotSerializableError as exc:
            return end(caught=str(exc))
        return end(caught="")

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="b", durability="sync")
        final = await run_to_rest(rt, "b")
    assert "object" in final.values["caught"] and "handle" in final.values["caught"]
    assert "ProgressReported" not in [e.type for e in await events_of(event_log, "b")]


async def test_progress_in_exit_mode_is_recorded_when_the_run_ends(event_log: EventLog) -> None:
    wf = streamed_workflow(name="exitmode")
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="x", durability="exit")
        await run_to_rest(rt, "x")
    got = await _collect(event_log, "x", "progress")
    assert [(u.step, u.branch, u.data) for u in got] == PROGRESS


async def test_bad_stream_requests_are_typed_errors(event_log: EventLog) -> None:
    wf = streamed_workflow()
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="ok", durability="sync")
        await run_to_rest(rt, "ok")
    with pytest.raises(UnknownRunError, match="nope"):
        await _collect(event_log, "nope", "events")
    with pytest.raises(ConfigError) as bad_mode:
        await _collect(event_log, "ok", "messages")
    for mode in STREAM_MODES:
        assert mode in str(bad_mode.value)
    with pytest.raises(ConfigError, match="until"):
        await _collect(event_log, "ok", "events", until="forever")
    with pytest.raises(ConfigError, match="after_seq"):
        await _collect(event_log, "ok", "events", after_seq=-1)


def _progress_event(run_id: str, seq: int) -> Event:
    return Event(run_id, seq, ProgressReported("left", 1, 0, {"pct": 50}))


async def test_progress_changes_neither_the_folded_state_nor_the_run_index(
    event_log: EventLog,
) -> None:
    wf = streamed_workflow()
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="f", durability="sync")
        await run_to_rest(rt, "f")
    history = [e for e in await events_of(event_log, "f")]
    for cut in range(1, len(history) + 1):
        before = fold(history[:cut])
        after = fold([_progress_event("f", cut + 1)], before)
        assert dataclasses.replace(after, seq=before.seq) == before
        info = RunInfo("f").after(history[:cut])
        moved = info.after([_progress_event("f", cut + 1)])
        assert dataclasses.replace(moved, last_seq=info.last_seq, updated_at=info.updated_at) == (
            info
        )
    assert not any(isinstance(e.data, RunMigrated) for e in history)


@pytest.mark.process
async def test_a_run_driven_by_another_process_streams_live_on_sqlite(tmp_path: Path) -> None:
    db, release = tmp_path / "shared.db", tmp_path / "release"
    driver = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.stream_driver",
        str(db),
        "remote",
        str(release),
        stdout=asyncio.subprocess.PIPE,
        env=_child_env(),
    )
    try:
        async with asyncio.timeout(BOUND_SECONDS):
            assert driver.stdout is not None
            assert (await driver.stdout.readline()).strip() == b"STARTED"
        async with SqliteEventLog(db) as log:
            async with _watchers(log, "remote") as watchers:
                await _release_on_progress(log, "remote", asyncio.Event())
                release.touch()  # only now can the other process's run go on
                got = {mode: await watcher for mode, watcher in watchers.items()}
            await _check_against_history(log, "remote", got)
        assert got["events"][-1].type == "RunCompleted"
        assert [(u.step, u.branch, u.data) for u in got["progress"]] == PROGRESS
        async with asyncio.timeout(BOUND_SECONDS):
            assert await driver.wait() == 0
    finally:
        if driver.returncode is None:
            driver.kill()
            await driver.wait()


def _child_env() -> dict[str, str]:
    from tests.crash.worker import child_env

    return child_env()
