"""Delta snapshots obey the replay laws (Hypothesis).

The runs are those of ``test_replay_laws`` (replace, append and merge keys,
parallel branches, interrupts, migrations that replace a list wholesale),
some ending as the runtime ends them, with the final values as the output.
A writer's live state is folded event by event, as ``RunWriter`` does, and a
:class:`SnapshotChain` snapshots it at an arbitrary interval with an
arbitrary base cadence; arbitrary snapshots are lost before they are saved
(a failed save restarts the chain), and the backend keeps an arbitrary
number. Whatever the draw, the state loaded at every seq, through the delta
snapshots, equals the fold of the events up to it.
"""

from __future__ import annotations

import asyncio
import copy

from hypothesis import given
from hypothesis import strategies as st

from agentlog.eventlog.events import Event, EventData, RunCompleted
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.projector import fold, load_state
from agentlog.projector._fold import apply
from agentlog.projector._snapshots import SnapshotChain
from agentlog.projector._state import RunState
from tests.property.test_replay_laws import PROPERTY, RUN, TS, as_events, runs


def _ended_with_values(payloads: list[EventData]) -> list[Event]:
    """The run, ending as the runtime ends one: RunCompleted with the values."""
    events = as_events(payloads)
    if fold(events).is_terminal:
        return events
    output = copy.deepcopy(fold(events).values)
    return [*events, Event(RUN, len(events) + 1, RunCompleted(output), TS, 1)]


async def _check(
    events: list[Event], every: int, base_every: int, keep: int, lost: list[bool]
) -> None:
    async with MemoryEventLog(keep_snapshots=keep) as log:
        await log.claim_writer(RUN)
        await log.append(events)
        live, chain, taken = RunState(), SnapshotChain(base_every), 0
        for event in events:
            apply(live, event)  # the writer's live state: lists grow in place
            if event.seq % every:
                continue
            snapshot = chain.encode(live)
            if lost[taken % len(lost)]:
                chain.restart()  # as the writer does when a save fails
            else:
                await log.save_snapshot(snapshot)
            taken += 1
        for k in range(1, len(events) + 1):
            loaded = await load_state(log, RUN, at_seq=k)
            assert loaded.to_dict() == fold(events[:k]).to_dict(), k
        assert (await load_state(log, RUN)).to_dict() == fold(events).to_dict()


@PROPERTY
@given(
    runs(),
    st.booleans(),
    st.integers(1, 4),
    st.integers(1, 4),
    st.integers(1, 4),
    st.lists(st.booleans(), min_size=1, max_size=6),
)
def test_state_from_delta_snapshots_equals_the_fold(
    payloads: list[EventData],
    end_with_values: bool,
    every: int,
    base_every: int,
    keep: int,
    lost: list[bool],
) -> None:
    events = _ended_with_values(payloads) if end_with_values else as_events(payloads)
    asyncio.run(_check(events, every, base_every, keep, lost))
