"""The one-statement cold read loads what the hook-by-hook read loads (Hypothesis).

``load_state`` on SQLite reads a run's newest snapshot (with its chain) and
the rows after it in one statement (``SqliteEventLog.cold_read``). Whatever
the history (the runs of ``test_replay_laws``), wherever the snapshots were
taken, whatever the read batch, and whichever row or snapshot was damaged
on disk (a checksum, a payload, a deleted row, a snapshot's bytes), it
gives what the hook-by-hook path gives (a log whose ``cold_read`` declines):
the same state, or the same typed error naming the same seq.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import tempfile
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentlog.errors import AgentlogError
from agentlog.eventlog._indexed import ColdRead
from agentlog.eventlog.events import EventData
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.projector import fold, load_state
from agentlog.projector._fold import apply
from agentlog.projector._snapshots import SnapshotChain
from agentlog.projector._state import RunState
from tests.property.test_replay_laws import PROPERTY, RUN, as_events, runs


class HookByHook(SqliteEventLog):
    """The SQLite log read as before the cold read: hook by hook."""

    def cold_read(
        self, run_id: str, *, upto_seq: int | None = None, snapshots: bool = True
    ) -> ColdRead | None:
        return None


_DAMAGE = (
    None,
    "UPDATE events SET checksum = checksum + 1 WHERE run_id = ? AND seq = ?",
    "UPDATE events SET payload = x'c1' WHERE run_id = ? AND seq = ?",
    "DELETE FROM events WHERE run_id = ? AND seq = ?",
    "UPDATE snapshots SET state = substr(state, 1, length(state) - 1) || x'00' "
    "WHERE run_id = ? AND seq = (SELECT max(seq) FROM snapshots WHERE run_id = ? AND seq <= ?)",
)


def _outcome(run: Any) -> Any:
    try:
        return asyncio.run(run)
    except AgentlogError as exc:
        return type(exc).__name__, getattr(exc, "seq", None)


async def _load(log_type: type[SqliteEventLog], path: str, batch: int, at: int | None) -> Any:
    async with log_type(path, read_batch=batch) as log:
        return (await load_state(log, RUN, at_seq=at)).to_dict()


async def _write(path: str, payloads: list[EventData], every: int, base_every: int) -> None:
    events = as_events(payloads)
    async with SqliteEventLog(path, keep_snapshots=2) as log:
        await log.claim_writer(RUN)
        await log.append(events)
        live, chain = RunState(), SnapshotChain(base_every)
        for event in events:
            apply(live, event)
            if event.seq % every == 0:
                await log.save_snapshot(chain.encode(live))


@PROPERTY
@given(
    runs(),
    st.integers(2, 8),
    st.integers(1, 4),
    st.integers(1, 6),
    st.sampled_from(range(len(_DAMAGE))),
    st.integers(0, 40),
    st.one_of(st.none(), st.integers(1, 40)),
)
def test_the_cold_read_loads_what_the_hook_by_hook_read_loads(
    payloads: list[EventData],
    every: int,
    base_every: int,
    batch: int,
    damage: int,
    at_damage: int,
    at_seq: int | None,
) -> None:
    events = as_events(payloads)
    at = None if at_seq is None else min(at_seq, len(events))
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "log.db")
        asyncio.run(_write(path, payloads, every, base_every))
        sql = _DAMAGE[damage]
        if sql is not None:
            seq = 1 + at_damage % len(events)
            with sqlite3.connect(path) as conn:
                conn.execute(sql, (RUN, RUN, seq) if "snapshots" in sql else (RUN, seq))
        cold = _outcome(_load(SqliteEventLog, path, batch, at))
        hooks = _outcome(_load(HookByHook, path, batch, at))
    assert cold == hooks
    if sql is None:
        assert cold == fold(events[: at or len(events)]).to_dict()
