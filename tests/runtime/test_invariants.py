"""One test (at least) per runtime invariant 3-11 of DESIGN.md, on memory and SQLite."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentlog.errors import (
    ConfigError,
    FencedError,
    RunExistsError,
    VersionMismatchError,
)
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import (
    RunMigrated,
    RunStatus,
    StepCompleted,
    TaskStarted,
    utcnow,
)
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.projector import SnapshotPolicy, fold, load_state
from agentlog.runtime import RetryPolicy, Runtime, StepContext, Workflow, end, goto
from agentlog.runtime._task_calls import idempotency_key
from tests.support.runtime import (
    Calls,
    Gate,
    config,
    event_log,
    events_of,
    replay,
    research_workflow,
    run_to_rest,
    types_of,
)

__all__ = ["event_log"]  # the fixture, imported for pytest

APPROVE = {"approved": True}


# -- 3. replay is deterministic ---------------------------------------------------


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_live_state_equals_replay_with_and_without_snapshots(
    event_log: EventLog, durability: str
) -> None:
    calls = Calls()
    wf = research_workflow(calls, flaky_branch_failures=1)
    cfg = config(snapshots=SnapshotPolicy(every=4))
    async with Runtime(event_log, workflows=[wf], config=cfg) as rt:
        await rt.start(wf, run_id="r", input={"topic": "t"}, durability=durability)
        parked = await run_to_rest(rt, "r")
        assert parked.status == RunStatus.WAITING
        assert (await replay(event_log, "r")).to_dict() == parked.to_dict()
        await rt.resume("r", APPROVE)
        live = await run_to_rest(rt, "r")
    assert live.status == RunStatus.COMPLETED
    assert live.values["sent"].startswith("sent:")
    plain = await replay(event_log, "r")
    snapped = await load_state(event_log, "r")
    assert await event_log.load_snapshot("r") is not None
    assert plain.to_dict() == live.to_dict() == snapped.to_dict()
    # folding the same events twice gives the same state
    events = await events_of(event_log, "r")
    assert fold(events).to_dict() == fold(events).to_dict() == live.to_dict()


async def test_time_travel_at_every_seq_equals_fold_of_prefix(event_log: EventLog) -> None:
    calls = Calls()
    wf = research_workflow(calls, flaky_branch_failures=1)
    cfg = config(snapshots=SnapshotPolicy(every=3))
    async with Runtime(event_log, workflows=[wf], config=cfg) as rt:
        await rt.start(wf, run_id="tt", input={"topic": "t"}, durability="sync")
        await run_to_rest(rt, "tt")
        await rt.resume("tt", APPROVE)
        await run_to_rest(rt, "tt")
    events = await events_of(event_log, "tt")
    assert len(events) > 15
    for seq in range(1, len(events) + 1):
        expected = fold(events[:seq]).to_dict()
        assert (await load_state(event_log, "tt", at_seq=seq)).to_dict() == expected
        assert (await replay(event_log, "tt", at_seq=seq)).to_dict() == expected


# -- 4. a recorded task result is never recomputed ------------------------------


async def test_task_result_is_returned_not_recomputed_after_interrupt_and_retry(
    event_log: EventLog,
) -> None:
    calls = Calls()
    wf = Workflow(
        "pay",
        state={"receipt": "replace", "answer": "replace"},
        retry=RetryPolicy(max_attempts=2, initial_interval=0.001),
    )
    state = {"fail_once": True}

    def charge(amount: int) -> str:
        calls.hit("charge")
        return f"receipt-{amount}"

    @wf.step
    async def pay(ctx: StepContext) -> Any:
        receipt = await ctx.task("charge", charge, 42)
        if state["fail_once"]:  # the step fails after the side effect: retry must not re-pay
            state["fail_once"] = False
            raise RuntimeError("after the charge")
        answer = ctx.interrupt("ok?")
        return end(receipt=receipt, answer=answer)

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="p", durability="sync")
        assert (await run_to_rest(rt, "p")).status == RunStatus.WAITING
        await rt.resume("p", "yes")
        final = await run_to_rest(rt, "p")
    assert final.values == {"receipt": "receipt-42", "answer": "yes"}
    assert calls.count["charge"] == 1
    types = await types_of(event_log, "p")
    assert types.count("TaskStarted") == 1 and types.count("TaskCompleted") == 1
    assert types.count("StepFailed") == 1


async def test_task_result_survives_a_dead_process(event_log: EventLog) -> None:
    """The process dies after the task is recorded; a new runtime does not call it again."""
    calls = Calls()
    gate = Gate()
    wf = Workflow("slow", state={"out": "replace"})

    def fetch() -> str:
        calls.hit("fetch")
        return "data"

    @wf.step
    async def work(ctx: StepContext) -> Any:
        calls.hit("work")
        data = await ctx.task("fetch", fetch)
        await gate.pass_through()
        return end(out=data)

    rt1 = Runtime(event_log, workflows=[wf], config=config("one"))
    await rt1.start(wf, run_id="s", durability="sync")
    await asyncio.wait_for(gate.reached.wait(), 10)
    await rt1.close()  # the worker is gone mid-step; its lease is released
    gate.release.set()
    async with Runtime(event_log, workflows=[wf], config=config("two")) as rt2:
        assert (await rt2.recover()).recovered == ["s"]
        final = await run_to_rest(rt2, "s")
    assert final.values == {"out": "data"}
    assert calls.count == {"work": 2, "fetch": 1}


# -- 5. idempotency keys are stable ---------------------------------------------------


async def test_idempotency_key_is_stable_across_crash_and_resume(event_log: EventLog) -> None:
    calls = Calls()
    first_try = asyncio.Event()
    wf = Workflow("mail", state={"ids": "append"})

    async def send(to: str, idempotency_key: str) -> str:
        n = calls.hit("send", idempotency_key)
        if n == 1:  # the process "dies" while the email is in flight
            first_try.set()
            await asyncio.Event().wait()
        return f"id-{to}"

    @wf.step
    async def mail(ctx: StepContext) -> Any:
        a = await ctx.task("send", send, "ann")
        b = await ctx.task("send", send, "bob")
        return end(ids=[a, b])

    rt1 = Runtime(event_log, workflows=[wf], config=config("one"))
    await rt1.start(wf, run_id="m", durability="async")
    await asyncio.wait_for(first_try.wait(), 10)
    started = [e.data for e in await events_of(event_log, "m") if isinstance(e.data, TaskStarted)]
    assert len(started) == 1  # the intent was durable before the effect ran
    await rt1.close()
    async with Runtime(event_log, workflows=[wf], config=config("two")) as rt2:
        await rt2.recover()
        final = await run_to_rest(rt2, "m")
    assert final.values == {"ids": ["id-ann", "id-bob"]}
    keys = calls.keys["send"]
    expected_first = idempotency_key("m", "mail", 0, 0, "send", 0)
    assert keys == [expected_first, expected_first, idempotency_key("m", "mail", 0, 0, "send", 1)]
    started = [e.data for e in await events_of(event_log, "m") if isinstance(e.data, TaskStarted)]
    assert [(s.key, s.attempt, s.call_index) for s in started] == [
        (expected_first, 1, 0),
        (expected_first, 2, 0),
        (keys[2], 1, 1),
    ]


def test_idempotency_key_depends_on_each_documented_component() -> None:
    base = ("run", "step", 0, 0, "task", 0)
    key = idempotency_key(*base)
    assert key == idempotency_key(*base)  # stable: a pure function of its inputs
    for i, other in enumerate(["run2", "step2", 1, 1, "task2", 1]):
        changed = list(base)
        changed[i] = other
        assert idempotency_key(*changed) != key, f"component {i} does not change the key"  # type: ignore[arg-type]
    # no ambiguity from concatenation
    assert idempotency_key("a", "bc", 0, 0, "t", 0) != idempotency_key("ab", "c", 0, 0, "t", 0)


# -- 6. durability modes (SQLite: read from a second log instance on the same file) --------


async def _seen_by_second_instance(path: Path, run_id: str) -> list[str]:
    async with SqliteEventLog(path) as other:
        if await other.find_run(run_id) is None:
            return []
        try:
            return [e.type async for e in other.read(run_id)]
        except Exception:  # nothing recorded yet
            return []


def _observing_workflow(path: Path, seen: dict[str, list[str]]) -> Workflow:
    wf = Workflow("observe", state={"n": "replace", "effect": "replace"})

    async def effect(idempotency_key: str) -> str:
        seen[f"effect:{idempotency_key}"] = await _seen_by_second_instance(path, "d")
        return "done"

    @wf.step(then="two")
    async def one(ctx: StepContext) -> Any:
        seen["one"] = await _seen_by_second_instance(path, "d")
        return {"n": 1}

    @wf.step(then="three")
    async def two(ctx: StepContext) -> Any:
        seen["two"] = await _seen_by_second_instance(path, "d")
        await ctx.task("effect", effect)
        return {"n": 2}

    @wf.step
    async def three(ctx: StepContext) -> Any:
        seen["three"] = await _seen_by_second_instance(path, "d")
        return end(n=3)

    return wf


async def test_sync_every_step_boundary_is_durable_before_the_next_step(tmp_path: Path) -> None:
    path, seen = tmp_path / "d.db", {}
    wf = _observing_workflow(path, seen)
    async with await Runtime.open(f"sqlite:///{path}", workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="d", durability="sync")
        assert (await run_to_rest(rt, "d")).status == RunStatus.COMPLETED
    assert seen["one"] == ["RunStarted"]
    assert seen["two"][-2:] == ["StepCompleted", "SuperstepCommitted"]
    assert seen["two"].count("StepCompleted") == 1
    assert seen["three"].count("SuperstepCommitted") == 2
    (effect_seen,) = [v for k, v in seen.items() if k.startswith("effect:")]
    assert effect_seen[-1] == "TaskStarted"


async def test_async_task_started_is_durable_before_the_side_effect(tmp_path: Path) -> None:
    path, seen = tmp_path / "d.db", {}
    wf = _observing_workflow(path, seen)
    async with await Runtime.open(f"sqlite:///{path}", workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="d", durability="async")
        assert (await run_to_rest(rt, "d")).status == RunStatus.COMPLETED
    ((name, effect_seen),) = [(k, v) for k, v in seen.items() if k.startswith("effect:")]
    assert effect_seen[-1] == "TaskStarted"
    async with SqliteEventLog(path) as other:
        started = [e.data async for e in other.read("d") if isinstance(e.data, TaskStarted)]
    assert name == f"effect:{started[0].key}"


async def test_exit_writes_nothing_the_run_produces_until_it_parks_or_ends(
    tmp_path: Path,
) -> None:
    path, seen = tmp_path / "d.db", {}
    wf = _observing_workflow(path, seen)
    async with await Runtime.open(f"sqlite:///{path}", workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="d", durability="exit")
        final = await run_to_rest(rt, "d")
    assert final.status == RunStatus.COMPLETED
    # The start is an input: on record before the run acts on it, in every mode.
    assert all(v == ["RunStarted"] for v in seen.values()), seen
    assert len(seen) == 4
    assert (await _seen_by_second_instance(path, "d"))[-1] == "RunCompleted"


# -- 7. a parked run costs nothing ----------------------------------------------------------


async def test_parked_run_needs_no_process_and_resumes_from_a_new_runtime(tmp_path: Path) -> None:
    calls = Calls()
    wf = research_workflow(calls)
    url = f"sqlite:///{tmp_path / 'park.db'}"
    async with await Runtime.open(url, workflows=[wf], config=config("a")) as rt:
        await rt.start(wf, run_id="park", input={"topic": "t"}, durability="sync")
        parked = await run_to_rest(rt, "park")
        assert parked.status == RunStatus.WAITING
        await asyncio.sleep(0)  # let the run task's done-callback run
        assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("agentlog run")]
        info = await rt.log.get_run("park")
        assert info.status == RunStatus.WAITING and info.lease_expires_at is None
    before = dict(calls.count)
    # a brand-new runtime on a brand-new log instance: only the file remains
    async with await Runtime.open(
        url, workflows=[research_workflow(calls)], config=config("b")
    ) as rt:
        await rt.resume("park", APPROVE)
        final = await run_to_rest(rt, "park")
    assert final.status == RunStatus.COMPLETED
    # the interrupted step re-ran from its start, answered this time
    assert calls.count["approve"] == before["approve"] + 1
    assert calls.count["approve.answered"] == 1
    # nothing before the interrupt was recomputed
    for name in ("plan", "search_a", "search_b", "search_c", "draft"):
        assert calls.count[name] == before[name] == 1
    assert calls.count["llm"] == before["llm"] == 5


async def test_code_before_interrupt_reruns_but_its_tasks_return_recorded_results(
    event_log: EventLog,
) -> None:
    calls = Calls()
    wf = Workflow("gate", state={"quote": "replace", "ok": "replace"})

    def quote() -> int:
        calls.hit("quote")
        return 99

    @wf.step
    async def ask(ctx: StepContext) -> Any:
        calls.hit("raw code before interrupt")
        price = await ctx.task("quote", quote)
        ok = ctx.interrupt({"price": price}, expects="bool")
        return end(quote=price, ok=ok)

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="g", durability="sync")
        await run_to_rest(rt, "g")
        await rt.resume("g", True)
        final = await run_to_rest(rt, "g")
    assert final.values == {"quote": 99, "ok": True}
    assert calls.count == {"raw code before interrupt": 2, "quote": 1}
    types = await types_of(event_log, "g")
    assert types.index("ResumeReceived") < types.index("StepCompleted")


# -- 8. parallel branches keep their work ------------------------------------------------


def _fan_out(calls: Calls, gate: Gate | None, *, b_attempts: int, b_fails: int) -> Workflow:
    wf = Workflow("fan", state={"out": "append"})
    fails = {"left": b_fails}

    @wf.step
    async def start(ctx: StepContext) -> Any:
        return goto("a", "b", "c")

    for name in "ac":

        async def done(ctx: StepContext) -> Any:
            calls.hit(ctx.step)
            return {"out": [ctx.step]}

        wf.step(name=name)(done)

    @wf.step(retry=RetryPolicy(max_attempts=b_attempts, initial_interval=0.001))
    async def b(ctx: StepContext) -> Any:
        calls.hit("b")
        if gate is not None and calls.count["b"] == 1:
            await gate.pass_through()
        if fails["left"] > 0:
            fails["left"] -= 1
            raise RuntimeError("b is down")
        return {"out": ["b"]}

    return wf


async def test_parallel_branch_retry_does_not_rerun_finished_branches(event_log: EventLog) -> None:
    calls = Calls()
    wf = _fan_out(calls, None, b_attempts=3, b_fails=2)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="f", durability="sync")
        final = await run_to_rest(rt, "f")
    assert final.status == RunStatus.COMPLETED
    assert final.values == {"out": ["a", "b", "c"]}  # branch order, not finish order
    assert calls.count == {"a": 1, "b": 3, "c": 1}


async def test_permanently_failed_branch_keeps_the_other_branches_writes(
    event_log: EventLog,
) -> None:
    calls = Calls()
    wf = _fan_out(calls, None, b_attempts=1, b_fails=1)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="f", durability="sync")
        final = await run_to_rest(rt, "f")
    assert final.status == RunStatus.FAILED
    assert "b is down" in final.error
    pending = {
        e.data.step: e.data.writes
        for e in await events_of(event_log, "f")
        if isinstance(e.data, StepCompleted) and e.data.superstep == 1
    }
    assert pending == {"a": {"out": ["a"]}, "c": {"out": ["c"]}}
    assert calls.count == {"a": 1, "b": 1, "c": 1}


@pytest.mark.parametrize("durability", ["sync", "async"])
async def test_after_process_death_only_branches_without_writes_rerun(
    event_log: EventLog, durability: str
) -> None:
    calls, gate = Calls(), Gate()
    wf = _fan_out(calls, gate, b_attempts=1, b_fails=0)
    rt1 = Runtime(event_log, workflows=[wf], config=config("one"))
    await rt1.start(wf, run_id="f", durability=durability)
    await asyncio.wait_for(gate.reached.wait(), 10)
    # a and c have finished: their writes are recorded at once, before b is done
    async with asyncio.timeout(60):  # a condition, not a fixed number of polls
        while (types := await types_of(event_log, "f")).count("StepCompleted") < 3:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    assert types.count("StepCompleted") == 3 and types.count("SuperstepCommitted") == 1
    await rt1.close()  # the process dies while b runs
    async with Runtime(event_log, workflows=[wf], config=config("two")) as rt2:
        assert (await rt2.recover()).recovered == ["f"]
        final = await run_to_rest(rt2, "f")
    assert final.values == {"out": ["a", "b", "c"]}
    assert calls.count == {"a": 1, "b": 2, "c": 1}


# -- 9. step limits count the whole run ------------------------------------------------


async def test_step_limit_is_counted_across_resumes(event_log: EventLog) -> None:
    wf = Workflow("loop", state={"i": "replace"}, max_steps=5)

    @wf.step
    async def think(ctx: StepContext) -> Any:
        i = ctx.state.get("i", 0) + 1
        if i % 2 == 0:
            ctx.interrupt(f"continue after {i}?")
        return goto("think", i=i)

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="l", durability="sync")
        resumes = 0
        while (state := await run_to_rest(rt, "l")).status == RunStatus.WAITING:
            resumes += 1
            assert resumes < 10
            await rt.resume("l", "go")
    assert state.status == RunStatus.FAILED
    assert "StepLimitExceeded" in state.error
    assert state.steps == 5 and state.values["i"] == 5
    assert resumes == 2  # limit reached with steps taken before and after each resume
    assert (await event_log.get_run("l")).steps == 5


# -- 10. version changes are caught --------------------------------------------------------


def _approval_wf(version: str, *, extra_key: bool = False) -> Workflow:
    state = {"draft": "replace", "ok": "replace"}
    if extra_key:
        state["reviewer"] = "replace"
    wf = Workflow("approval", version=version, state=state)

    @wf.step
    async def draft(ctx: StepContext) -> Any:
        return goto("approve", draft="text")

    @wf.step
    async def approve(ctx: StepContext) -> Any:
        answer = ctx.interrupt("ok?")
        return end(ok=answer)

    return wf


@pytest.mark.parametrize(
    ("version", "extra_key"), [("2", False), ("1", True)], ids=["version", "fingerprint"]
)
async def test_resume_under_changed_code_raises_version_mismatch(
    event_log: EventLog, version: str, extra_key: bool
) -> None:
    async with Runtime(event_log, workflows=[_approval_wf("1")], config=config()) as rt:
        await rt.start("approval", run_id="v", durability="sync")
        await run_to_rest(rt, "v")
    last = (await event_log.get_run("v")).last_seq
    changed = _approval_wf(version, extra_key=extra_key)
    async with Runtime(event_log, workflows=[changed], config=config("new")) as rt:
        with pytest.raises(VersionMismatchError, match="migration"):
            await rt.resume("v", True)
        info = await event_log.get_run("v")
        assert info.last_seq == last and info.status == RunStatus.WAITING


async def test_registered_migration_moves_a_parked_run(event_log: EventLog) -> None:
    async with Runtime(event_log, workflows=[_approval_wf("1")], config=config()) as rt:
        await rt.start("approval", run_id="v", durability="sync")
        await run_to_rest(rt, "v")
    v2 = _approval_wf("2", extra_key=True)

    @v2.migration("1")
    def add_reviewer(values: dict[str, Any]) -> dict[str, Any]:
        return {**values, "draft": values["draft"].upper(), "reviewer": "nobody"}

    async with Runtime(event_log, workflows=[v2], config=config("new")) as rt:
        await rt.resume("v", True)
        live = await run_to_rest(rt, "v")
    assert live.values == {"draft": "TEXT", "reviewer": "nobody", "ok": True}
    assert live.version == "2" and live.fingerprint == v2.fingerprint
    migrated = [e.data for e in await events_of(event_log, "v") if isinstance(e.data, RunMigrated)]
    assert len(migrated) == 1 and migrated[0].from_version == "1"
    v2.migrations.clear()  # replay needs no migration code: the result was recorded
    assert (await replay(event_log, "v")).to_dict() == live.to_dict()


# -- 11. starting is idempotent on run_id --------------------------------------------------


async def test_start_is_idempotent_on_run_id(event_log: EventLog) -> None:
    calls = Calls()
    wf = research_workflow(calls)
    other = Workflow("other", state={"x": "replace"})

    @other.step
    async def only(ctx: StepContext) -> Any:
        return end(x=1)

    async with Runtime(event_log, workflows=[wf, other], config=config()) as rt:
        first = await rt.start(wf, run_id="i", input={"topic": "a"}, durability="sync")
        await run_to_rest(rt, "i")
        again = await rt.start(wf, run_id="i", input={"topic": "b"}, durability="sync")
        assert again.run_id == first.run_id == "i"
        state = await run_to_rest(rt, "i")
        with pytest.raises(RunExistsError, match="research"):
            await rt.start(other, run_id="i")
        with pytest.raises(ConfigError, match="run_id"):
            await rt.start(wf, run_id="")
    assert state.values["topic"] == "a"
    assert (await types_of(event_log, "i")).count("RunStarted") == 1
    assert calls.count["plan"] == 1
    assert [r.run_id for r in await event_log.list_runs()] == ["i"]


# -- cancellation -----------------------------------------------------------------------


async def test_cancel_waiting_running_and_finished_runs(event_log: EventLog) -> None:
    calls, gate = Calls(), Gate()
    wf = Workflow("c", state={"n": "replace"})

    @wf.step(then="second")
    async def first(ctx: StepContext) -> Any:
        calls.hit("first")
        if ctx.run_id == "running":
            await gate.pass_through()
        if ctx.run_id == "waiting":
            ctx.interrupt("?")
        return {"n": 1}

    @wf.step
    async def second(ctx: StepContext) -> Any:
        calls.hit("second")
        return end(n=2)

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="waiting", durability="sync")
        await run_to_rest(rt, "waiting")
        cancelled = await rt.cancel("waiting", "no longer needed")
        assert cancelled.status == RunStatus.CANCELLED
        assert cancelled.error == "no longer needed"

        await rt.start(wf, run_id="running", durability="sync")
        await asyncio.wait_for(gate.reached.wait(), 10)
        cancelling = asyncio.create_task(rt.cancel("running"))
        executor = rt.active_runs["running"]
        await asyncio.wait_for(executor.cancel_requested.wait(), 10)
        stopped = await asyncio.wait_for(cancelling, 10)  # not waiting for the step
        gate.release.set()
        assert stopped.status == RunStatus.CANCELLED
        assert stopped.values == {}  # the step in flight was interrupted; the next never ran

        await rt.start(wf, run_id="done", durability="sync")
        await run_to_rest(rt, "done")
        last = (await event_log.get_run("done")).last_seq
        assert (await rt.cancel("done")).status == RunStatus.COMPLETED
        assert (await event_log.get_run("done")).last_seq == last
    assert calls.count["second"] == 1  # only the "done" run got there
    assert (await types_of(event_log, "running"))[-1] == "RunCancelled"
    assert (await replay(event_log, "waiting")).status == RunStatus.CANCELLED


# -- recover(): expired leases are taken over, live ones left alone ---------------------------


async def test_recover_takes_expired_leases_and_leaves_live_ones(event_log: EventLog) -> None:
    calls, gate = Calls(), Gate()
    wf = Workflow("rec", state={"by": "replace"})

    @wf.step
    async def work(ctx: StepContext) -> Any:
        calls.hit(ctx.run_id)
        if not gate.release.is_set():
            await gate.pass_through()
        return end(by="done")

    rt_a = Runtime(event_log, workflows=[wf], config=config("A"))
    for run_id in ("dead", "alive"):
        await rt_a.start(wf, run_id=run_id, durability="sync")
    await asyncio.wait_for(gate.reached.wait(), 10)
    await rt_a.close()  # both runs are mid-step with no writer
    gate.release.set()
    # "alive" gets a live writer with a long lease; "dead" one whose lease runs out
    await event_log.claim_writer("alive", owner="live-host:1", lease_seconds=300, force=False)
    await event_log.claim_writer("dead", owner="dead-host:1", lease_seconds=0.05, force=False)
    while (info := await event_log.get_run("dead")).lease_expires_at is not None:
        if info.lease_expires_at < utcnow():
            break
        await asyncio.sleep(0.02)
    async with Runtime(event_log, workflows=[wf], config=config("B")) as rt_b:
        assert (await rt_b.recover()).recovered == ["dead"]
        assert (await run_to_rest(rt_b, "dead")).status == RunStatus.COMPLETED
        assert (await rt_b.recover()).recovered == []
    alive = await event_log.get_run("alive")
    assert alive.status == RunStatus.RUNNING and alive.lease_owner == "live-host:1"
    dead_types = await types_of(event_log, "dead")
    assert "WriterClaimed" in dead_types and dead_types[-1] == "RunCompleted"


async def test_fenced_writer_stops_and_new_writer_finishes(event_log: EventLog) -> None:
    """A writer whose run was taken over (forced) stops with FencedError."""
    gate = Gate()
    wf = Workflow("fence", state={"x": "replace"})

    @wf.step
    async def work(ctx: StepContext) -> Any:
        if not gate.release.is_set():
            await gate.pass_through()
        return end(x=ctx.run_id)

    rt_a = Runtime(event_log, workflows=[wf], config=config("A"))
    await rt_a.start(wf, run_id="x", durability="sync")
    await asyncio.wait_for(gate.reached.wait(), 10)
    await event_log.claim_writer("x", owner="B", force=True)  # B fences A
    gate.release.set()
    with pytest.raises(FencedError):
        await asyncio.wait_for(rt_a.wait("x"), 10)
    await rt_a.close()
    types = await types_of(event_log, "x")
    assert "StepCompleted" not in types  # the fenced writer recorded nothing more
    assert types == ["RunStarted"]


async def test_migration_that_keeps_an_appended_list_replays_the_same(
    event_log: EventLog,
) -> None:
    """Regression: RunMigrated values must not be grown in place by later appends."""

    def build(version: str) -> Workflow:
        wf = Workflow("grow", version=version, state={"items": "append", "ok": "replace"})

        @wf.step
        async def first(ctx: StepContext) -> Any:
            return goto("ask", items=["a"])

        @wf.step
        async def ask(ctx: StepContext) -> Any:
            ok = ctx.interrupt("more?")
            return goto("more", ok=ok)

        @wf.step
        async def more(ctx: StepContext) -> Any:
            return end(items=["b", "c"])

        return wf

    async with Runtime(event_log, workflows=[build("1")], config=config()) as rt:
        await rt.start("grow", run_id="g", durability="sync")
        await run_to_rest(rt, "g")
    v2 = build("2")
    v2.migration("1")(lambda values: {**values, "items": values["items"] + ["migrated"]})
    async with Runtime(event_log, workflows=[v2], config=config("new")) as rt:
        await rt.resume("g", True)
        live = await run_to_rest(rt, "g")
    assert live.values["items"] == ["a", "migrated", "b", "c"]
    events = await events_of(event_log, "g")
    migrated = [e.data for e in events if isinstance(e.data, RunMigrated)]
    assert migrated[0].values["items"] == ["a", "migrated"]  # the record was not grown
    assert fold(events).to_dict() == fold(events).to_dict() == live.to_dict()
    assert (await replay(event_log, "g")).to_dict() == live.to_dict()
