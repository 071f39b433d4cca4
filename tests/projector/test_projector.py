"""The projector: reducers, fold, pending writes, snapshots, time travel, diff."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from structlog.testing import capture_logs

from agentlog.errors import ConfigError, ReplayError, UnknownRunError
from agentlog.eventlog._base import Snapshot
from agentlog.eventlog.codec import pack
from agentlog.eventlog.events import (
    Event,
    EventData,
    InterruptRaised,
    ResumeReceived,
    RunStarted,
    StepCompleted,
    StepFailed,
    SuperstepCommitted,
    TaskCompleted,
    TaskStarted,
)
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.projector import (
    SnapshotPolicy,
    append,
    decode_state,
    diff_states,
    encode_state,
    fold,
    load_state,
    merge,
    reducer_name,
    register_reducer,
    replace,
    save_state,
)

TS = datetime(2026, 1, 1, tzinfo=UTC)
REDUCERS = {"notes": "append", "meta": "merge", "title": "replace"}


def run(*payloads: EventData, run_id: str = "p") -> list[Event]:
    started = RunStarted("wf", "1", {"title": "t"}, "sync", "fp", {}, ["a"], dict(REDUCERS))
    return [Event(run_id, i, d, TS, 1) for i, d in enumerate((started, *payloads), start=1)]


def test_builtin_reducers() -> None:
    assert replace([1], 2) == 2
    assert append(None, 1) == [1] and append([1], [2, 3]) == [1, 2, 3]
    assert merge(None, {"a": 1}) == {"a": 1} and merge({"a": 1}, {"b": 2}) == {"a": 1, "b": 2}
    with pytest.raises(TypeError, match="needs a dict"):
        merge({}, [1])


def test_user_reducers_are_registered_by_name() -> None:
    def longest(current: Any, update: Any) -> Any:
        return max(current or "", update, key=len)

    name = reducer_name(longest)
    assert name.endswith("longest") and reducer_name(longest) == name
    register_reducer(name, longest)  # the same function again is fine
    with pytest.raises(ConfigError, match="already registered"):
        register_reducer(name, replace)


def test_pending_writes_apply_in_branch_order_only_at_commit() -> None:
    events = run(
        StepCompleted("b", 0, 1, {"notes": ["from b"], "title": "b"}),
        StepCompleted("a", 0, 0, {"notes": ["from a"], "title": "a", "meta": {"k": 1}}),
    )
    before = fold(events)
    assert before.values == {"title": "t"} and set(before.pending) == {0, 1}
    assert before.steps == 2
    after = fold([Event("p", 4, SuperstepCommitted(0, ["c"]), TS, 1)], before)
    assert after.values == {"title": "b", "notes": ["from a", "from b"], "meta": {"k": 1}}
    assert after.pending == {} and after.superstep == 1 and after.next_steps == ["c"]


def test_tasks_interrupts_and_failures_are_folded() -> None:
    state = fold(
        run(
            TaskStarted("k", "llm", "a", 0, 0, 0),
            TaskCompleted("k", {"text": "hi"}, 3.0),
            StepFailed("a", 0, 0, 1, "E: x"),
            InterruptRaised("a", 0, 0, 0, "ok?", "bool"),
        )
    )
    assert state.tasks["k"]["status"] == "completed" and state.tasks["k"]["result"] == {
        "text": "hi"
    }
    assert state.attempts == {0: 1} and state.status == "waiting"
    resumed = fold([Event("p", 6, ResumeReceived(True), TS, 1)], state)
    assert resumed.status == "running" and resumed.interrupts == []
    assert resumed.resume_values == {"0:0:0": True}


def test_fold_rejects_gaps_and_foreign_events() -> None:
    events = run(StepCompleted("a", 0, 0, {}))
    with pytest.raises(ReplayError, match="gap"):
        fold([events[0], Event("p", 3, StepCompleted("a", 0, 0, {}), TS)])
    with pytest.raises(ReplayError, match="another run"):
        fold([events[0], Event("other", 2, StepCompleted("a", 0, 0, {}), TS)])
    with pytest.raises(ReplayError, match="cannot fold"):  # a write the reducer rejects
        fold(
            [
                *events,
                Event("p", 3, StepCompleted("b", 0, 1, {"meta": [1]}), TS),
                Event("p", 4, SuperstepCommitted(0, []), TS),
            ]
        )


def test_bad_snapshots_are_ignored_with_a_warning() -> None:
    state = fold(run())
    good = Snapshot("p", 1, encode_state(state), TS)
    assert decode_state(good) is not None
    with capture_logs() as logs:
        assert decode_state(Snapshot("p", 1, b"\xc1garbage", TS)) is None
        assert decode_state(Snapshot("p", 1, pack({"format": 99, "state": {}}), TS)) is None
        assert decode_state(Snapshot("p", 2, good.state, TS)) is None  # wrong seq
    assert [entry["event"] for entry in logs] == ["snapshot ignored"] * 3


async def test_load_state_errors_and_snapshot_fallback() -> None:
    events = run(StepCompleted("a", 0, 0, {"notes": [1]}), SuperstepCommitted(0, []))
    async with MemoryEventLog() as log:
        with pytest.raises(UnknownRunError):
            await load_state(log, "p")
        await log.claim_writer("p")
        await log.append(events)
        with pytest.raises(ConfigError, match="no seq 9"):
            await load_state(log, "p", at_seq=9)
        with pytest.raises(ConfigError, match="1 or more"):
            await load_state(log, "p", at_seq=0)
        await log.save_snapshot(Snapshot("p", 2, b"corrupt", TS))
        await save_state(log, fold(events[:1]))
        # a corrupt snapshot at seq 2 is skipped in favour of folding the events
        assert (await load_state(log, "p", at_seq=2)).to_dict() == fold(events[:2]).to_dict()
        assert (await load_state(log, "p")).values == {"title": "t", "notes": [1]}


def test_snapshot_policy() -> None:
    policy = SnapshotPolicy(every=3)
    state = fold(run(StepCompleted("a", 0, 0, {}), SuperstepCommitted(0, ["a"])))
    assert policy.due(state, 0) and not policy.due(state, 1) and not policy.due(state, 3)
    parked = fold([Event("p", 4, InterruptRaised("a", 1, 0, 0, "?"), TS, 1)], state)
    assert policy.due(parked, 3) and not SnapshotPolicy(every=10, on_park=False).due(parked, 3)


def test_diff_states() -> None:
    events = run(
        StepCompleted("a", 0, 0, {"notes": ["x"], "title": "u"}), SuperstepCommitted(0, [])
    )
    changes = {c.path: c for c in diff_states(fold(events[:1]), fold(events))}
    assert changes["values.notes"].op == "added" and changes["values.notes"].after == ["x"]
    assert changes["values.title"].op == "changed" and changes["values.title"].before == "t"
    assert changes["steps"].to_dict() == {"path": "steps", "op": "changed", "before": 0, "after": 1}
    assert diff_states(fold(events), fold(events)) == []
