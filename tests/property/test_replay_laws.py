"""Replay laws over generated runs (Hypothesis).

Runs are generated event by event in the shape the runtime writes them:
RunStarted, then supersteps of 1-3 branches whose tasks, failures and
interrupts interleave, each superstep ending in SuperstepCommitted, then
maybe a terminal event. For every generated run:

* ``fold`` is deterministic and never mutates the state it starts from;
* snapshot(k) + fold(events after k) == fold(all events), for every k,
  through the real snapshot bytes;
* encode_state / decode_state round-trips;
* time travel (``load_state(at_seq=k)``, with snapshots in the log) equals
  the fold of the first k events.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog.eventlog._base import Snapshot
from agentlog.eventlog.events import (
    Event,
    EventData,
    InterruptRaised,
    ResumeReceived,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunMigrated,
    RunStarted,
    StepCompleted,
    StepFailed,
    SuperstepCommitted,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
    WriterClaimed,
)
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.projector import decode_state, encode_state, fold, load_state, save_state

RUN = "prop-run"
KEYS = {"r": "replace", "a": "append", "m": "merge"}
TS = datetime(2026, 1, 1, tzinfo=UTC)

scalars = st.one_of(st.integers(-1000, 1000), st.text(max_size=6), st.booleans(), st.none())


def _write_for(reducer: str) -> st.SearchStrategy[Any]:
    if reducer == "append":
        return st.one_of(scalars, st.lists(scalars, max_size=3))
    if reducer == "merge":
        return st.dictionaries(st.sampled_from("xyz"), scalars, max_size=3)
    return st.one_of(scalars, st.lists(scalars, max_size=2))


@st.composite
def writes(draw: st.DrawFn, reducers: dict[str, str]) -> dict[str, Any]:
    keys = draw(st.lists(st.sampled_from(sorted(reducers)), unique=True, max_size=3))
    return {key: draw(_write_for(reducers[key])) for key in keys}


@st.composite
def runs(draw: st.DrawFn) -> list[EventData]:
    """A run's payloads, in an order the runtime could have written them."""
    reducers = dict(KEYS)
    out: list[EventData] = [
        RunStarted(
            "prop",
            "1",
            draw(writes(reducers)),
            draw(st.sampled_from(["sync", "async", "exit"])),
            "fp1",
            {"max_steps": 100},
            ["s0"],
            dict(reducers),
        )
    ]
    for superstep in range(draw(st.integers(0, 4))):
        branches = draw(st.integers(1, 3))
        order = draw(st.permutations(range(branches)))  # branches finish in any order
        for branch in order:
            if draw(st.booleans()):
                out.append(WriterClaimed(draw(st.integers(1, 9)), "owner"))
            for call in range(draw(st.integers(0, 2))):
                key = f"k{superstep}.{branch}.{call}"
                out.append(TaskStarted(key, "t", f"s{branch}", superstep, branch, call))
                if draw(st.booleans()):
                    out.append(TaskFailed(key, "E: boom", 1, 1.5))
                    out.append(TaskStarted(key, "t", f"s{branch}", superstep, branch, call, 2))
                out.append(TaskCompleted(key, draw(scalars), 2.0))
            if draw(st.integers(0, 4)) == 0:
                out.append(StepFailed(f"s{branch}", superstep, branch, 1, "E: flaky"))
            if draw(st.integers(0, 4)) == 0:
                out.append(InterruptRaised(f"s{branch}", superstep, branch, 0, "ok?", "str"))
                out.append(ResumeReceived(draw(st.text(max_size=4))))
            goto = draw(st.lists(st.sampled_from(["s0", "s1", "s2"]), max_size=2))
            out.append(StepCompleted(f"s{branch}", superstep, branch, draw(writes(reducers)), goto))
        out.append(SuperstepCommitted(superstep, draw(st.lists(st.just("s0"), max_size=2))))
        if draw(st.integers(0, 6)) == 0:
            reducers = {**reducers, "n": "replace"}
            values = {"r": draw(scalars), "a": [1], "m": {"x": 1}}
            out.append(RunMigrated("1", "2", "fp2", dict(reducers), values))
    end = draw(st.sampled_from([None, RunCompleted(), RunFailed("E: x"), RunCancelled("why")]))
    if end is not None:
        out.append(end)
    return out


def as_events(payloads: list[EventData]) -> list[Event]:
    return [Event(RUN, seq, data, TS, 1) for seq, data in enumerate(payloads, start=1)]


PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(runs())
def test_fold_is_deterministic_and_pure(payloads: list[EventData]) -> None:
    events = as_events(payloads)
    first, second = fold(events), fold(events)
    assert first.to_dict() == second.to_dict()
    assert first.seq == len(events)
    half = fold(events[: len(events) // 2])
    before = half.to_dict()
    fold(events[len(events) // 2 :], half)
    assert half.to_dict() == before  # the starting state was not mutated


@PROPERTY
@given(runs())
def test_snapshot_plus_tail_equals_full_fold_for_every_k(payloads: list[EventData]) -> None:
    events = as_events(payloads)
    full = fold(events).to_dict()
    for k in range(1, len(events) + 1):
        head = fold(events[:k])
        restored = decode_state(Snapshot(RUN, k, encode_state(head), TS))
        assert restored is not None
        assert fold(events[k:], restored).to_dict() == full


@PROPERTY
@given(runs())
def test_encode_decode_state_round_trips(payloads: list[EventData]) -> None:
    events = as_events(payloads)
    for k in range(1, len(events) + 1):
        state = fold(events[:k])
        restored = decode_state(Snapshot(RUN, k, encode_state(state), TS))
        assert restored is not None and restored.to_dict() == state.to_dict()


async def _time_travel(events: list[Event], snapshot_at: list[int]) -> None:
    async with MemoryEventLog(keep_snapshots=100) as log:
        await log.claim_writer(RUN)
        await log.append(events)
        for k in snapshot_at:
            await save_state(log, fold(events[:k]))
        for k in range(1, len(events) + 1):
            expected = fold(events[:k]).to_dict()
            assert (await load_state(log, RUN, at_seq=k)).to_dict() == expected
            assert (await load_state(log, RUN, at_seq=k, use_snapshots=False)).to_dict() == expected
        assert (await load_state(log, RUN)).to_dict() == fold(events).to_dict()


@PROPERTY
@given(runs(), st.data())
def test_time_travel_equals_prefix_fold(payloads: list[EventData], data: st.DataObject) -> None:
    events = as_events(payloads)
    snapshot_at = data.draw(st.lists(st.integers(1, len(events)), unique=True, max_size=4))
    asyncio.run(_time_travel(events, snapshot_at))
