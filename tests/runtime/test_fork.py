"""``Runtime.fork``: a new run from another run's state at a seq (memory and SQLite).

Real executions are counted (tests/support/fork.py), so "did not run again"
is a count, not a belief.
"""

from __future__ import annotations

import pytest

from agentlog.errors import (
    ConfigError,
    NotSerializableError,
    RunExistsError,
    UnknownRunError,
    UnknownWorkflowError,
    VersionMismatchError,
)
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.codec import decode_event, encode_event
from agentlog.eventlog.events import Event, RunForked, RunStatus, TaskStarted, WriterClaimed
from agentlog.projector import fold, load_state
from agentlog.runtime import Runtime
from tests.support.fork import CALLS, chain_workflow, comparable, events_of, reset, seq_of
from tests.support.runtime import config, event_log, run_to_rest

__all__ = ["event_log"]


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    reset()


async def _finished_origin(log: EventLog, run_id: str = "origin") -> list[Event]:
    """Run the chain to completion as ``run_id``; return its events."""
    wf = chain_workflow()
    async with Runtime(log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id=run_id, input={"topic": "cats"}, durability="sync")
        assert (await run_to_rest(rt, run_id)).status == RunStatus.COMPLETED
    return await events_of(log, run_id)


def _stored(events: list[Event]) -> list[bytes]:
    return [encode_event(e) for e in events]


async def test_the_fork_starts_from_the_origin_state_at_every_seq(event_log: EventLog) -> None:
    origin = await _finished_origin(event_log)
    wf = chain_workflow()
    # execute=False: the fork is recorded, not driven, so its start can be looked at.
    async with Runtime(event_log, workflows=[wf], config=config(execute=False)) as rt:
        for seq in range(1, len(origin) + 1):
            await rt.fork("origin", seq, new_run_id=f"fork-{seq}")
            forked = await events_of(event_log, f"fork-{seq}")
            assert isinstance(forked[-1].data, RunForked)
            start = await load_state(event_log, f"fork-{seq}", at_seq=forked[-1].seq)
            assert comparable(start) == comparable(fold(origin[:seq])), seq
            assert start.forked_from == {"run_id": "origin", "seq": seq}
            assert not any(isinstance(e.data, WriterClaimed) for e in forked[:-1])
            assert {e.writer_epoch for e in forked} == {1}
    assert CALLS.count["task.fetch"] == 1, "recording a fork runs nothing"


async def test_tasks_before_the_fork_point_are_not_run_again_and_later_ones_are(
    event_log: EventLog,
) -> None:
    origin = await _finished_origin(event_log)
    before = _stored(origin)
    after_think = seq_of(origin, "SuperstepCommitted", superstep=1)
    wf = chain_workflow()
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        handle = await rt.fork(
            "origin", after_think, new_run_id="what-if", updates={"topic": "dogs"}
        )
        final = await run_to_rest(rt, handle.run_id)
    assert final.status == RunStatus.COMPLETED
    assert dict(CALLS.count) == {
        "step.fetch": 1,
        "task.fetch": 1,
        "step.think": 1,
        "task.think": 1,
        "step.write": 2,
        "task.write": 2,
    }
    assert final.values["text"] == "task.write#2 on dogs"  # the update, seen by the new step
    assert final.values["facts"] == ["task.fetch#1"]  # the origin's recorded results
    assert final.forked_from == {"run_id": "origin", "seq": after_think}
    assert _stored(await events_of(event_log, "origin")) == before, "the origin is unchanged"
    assert (await load_state(event_log, "origin")).values["text"] == "task.write#1 on cats"


async def test_a_fork_between_a_task_result_and_its_step_runs_the_step_not_the_task(
    event_log: EventLog,
) -> None:
    origin = await _finished_origin(event_log)
    mid_step = seq_of(origin, "TaskCompleted", nth=2)  # think's task done, its step not recorded
    wf = chain_workflow()
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.fork("origin", mid_step, new_run_id="mid")
        final = await run_to_rest(rt, "mid")
    assert final.status == RunStatus.COMPLETED
    # As after a crash at that seq: the step runs again, its recorded task does not.
    assert (CALLS.count["step.think"], CALLS.count["task.think"]) == (2, 1)
    assert final.values["thought"] == "task.think#1"


async def test_a_task_started_but_unfinished_at_the_fork_runs_again_under_the_forks_key(
    event_log: EventLog,
) -> None:
    origin = await _finished_origin(event_log)
    started = seq_of(origin, "TaskStarted", name="think")
    wf = chain_workflow()
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.fork("origin", started, new_run_id="in-flight")
        final = await run_to_rest(rt, "in-flight")
    assert final.values["thought"] == "task.think#2"
    keys = CALLS.keys["task.think"]
    assert len(keys) == 2 and keys[0] != keys[1], "the fork is another run: its own key"
    forked = await events_of(event_log, "in-flight")
    intents = [e.data for e in forked if isinstance(e.data, TaskStarted)]
    started_keys = [data.key for data in intents if data.name == "think"]
    assert started_keys == [keys[1], keys[1]]  # the copied intent, re-keyed, then the new run


async def test_a_fork_of_a_parked_run_is_parked_and_resumes_on_its_own(
    event_log: EventLog,
) -> None:
    from tests.support.runtime import research_workflow

    calls = CALLS
    wf = research_workflow(calls)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="parked", input={"topic": "t"}, durability="sync")
        parked = await run_to_rest(rt, "parked")
        assert parked.status == RunStatus.WAITING
        await rt.fork("parked", parked.seq, new_run_id="parked-fork")
        fork = await rt.get_state("parked-fork")
        assert fork.status == RunStatus.WAITING and len(fork.interrupts) == 1
        await rt.resume("parked-fork", {"approved": True})
        done = await run_to_rest(rt, "parked-fork")
    assert done.status == RunStatus.COMPLETED
    assert (await load_state(event_log, "parked")).status == RunStatus.WAITING
    assert calls.count["llm"] == 5 and calls.count["email"] == 1


async def test_bad_input_is_refused_and_records_nothing(event_log: EventLog) -> None:
    origin = await _finished_origin(event_log)
    await _finished_origin(event_log, "taken")
    before = {r.run_id: r.last_seq for r in await event_log.list_runs()}
    stored = _stored(origin)
    wf = chain_workflow()
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        with pytest.raises(UnknownRunError, match="nope"):
            await rt.fork("nope", 1, new_run_id="new")
        for seq in (0, -1, True, len(origin) + 1):
            with pytest.raises(ConfigError):
                await rt.fork("origin", seq, new_run_id="new")  # type: ignore[arg-type]
        with pytest.raises(RunExistsError, match="taken"):
            await rt.fork("origin", 2, new_run_id="taken")
        with pytest.raises(RunExistsError):
            await rt.fork("origin", 2, new_run_id="origin")
        with pytest.raises(ConfigError, match="not in the state"):
            await rt.fork("origin", 2, new_run_id="new", updates={"nonsense": 1})
        with pytest.raises(ConfigError, match="mapping"):
            await rt.fork("origin", 2, new_run_id="new", updates=["topic"])  # type: ignore[arg-type]
        with pytest.raises(NotSerializableError):
            await rt.fork("origin", 2, new_run_id="new", updates={"topic": object()})
        with pytest.raises(ConfigError):
            await rt.fork("origin", 2, new_run_id="")
    async with Runtime(event_log, workflows=[chain_workflow("other")], config=config()) as rt:
        with pytest.raises(UnknownWorkflowError, match="fork-chain"):
            await rt.fork("origin", 2, new_run_id="new")
    newer = chain_workflow(version="2")
    async with Runtime(event_log, workflows=[newer], config=config()) as rt:
        with pytest.raises(VersionMismatchError, match="migration"):
            await rt.fork("origin", 2, new_run_id="new")
    assert await event_log.find_run("new") is None
    assert {r.run_id: r.last_seq for r in await event_log.list_runs()} == before
    assert _stored(await events_of(event_log, "origin")) == stored


def test_run_forked_round_trips_through_the_codec_and_folds_its_writes() -> None:
    event = Event("f", 2, RunForked("o", 7, {"notes": ["x"], "topic": "t"}), writer_epoch=3)
    assert decode_event(encode_event(event)) == event
    started = fold([Event("f", 1, _started())])
    state = fold([event], started)
    assert state.values == {"notes": ["a", "x"], "topic": "t"}  # reduced: append, replace
    assert state.forked_from == {"run_id": "o", "seq": 7}
    assert state.status == RunStatus.RUNNING


def _started() -> object:
    from agentlog.eventlog.events import RunStarted

    return RunStarted(
        "wf", "1", {"notes": ["a"]}, "sync", "fp", reducers={"notes": "append", "topic": "replace"}
    )


async def test_an_origin_recorded_under_older_code_is_migrated_in_the_fork(
    event_log: EventLog,
) -> None:
    origin = await _finished_origin(event_log)
    after_think = seq_of(origin, "SuperstepCommitted", superstep=1)
    newer = chain_workflow(version="2")

    @newer.migration("1")
    def to_v2(values: dict[str, object]) -> dict[str, object]:
        return {**values, "topic": "migrated"}

    async with Runtime(event_log, workflows=[newer], config=config()) as rt:
        await rt.fork("origin", after_think, new_run_id="v2")
        final = await run_to_rest(rt, "v2")
    assert final.version == "2" and final.values["text"] == "task.write#2 on migrated"
    types = [e.type for e in await events_of(event_log, "v2")]
    assert types[after_think : after_think + 2] == ["RunForked", "RunMigrated"]
    assert (await load_state(event_log, "origin")).version == "1"


async def test_forked_runs_pass_the_replay_check_at_every_fork_point(event_log: EventLog) -> None:
    from agentlog.replay import verify_history

    origin = await _finished_origin(event_log)
    wf = chain_workflow()
    # Every seq: a fork at a bare TaskStarted starts that task again (as after a
    # crash), and the updates change what the steps that run again read and write.
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        for seq in range(1, len(origin) + 1):
            await rt.fork("origin", seq, new_run_id=f"f{seq}", updates={"topic": f"t{seq}"})
            assert (await run_to_rest(rt, f"f{seq}")).status == RunStatus.COMPLETED
            assert await verify_history(wf, await events_of(event_log, f"f{seq}")) == [], seq
