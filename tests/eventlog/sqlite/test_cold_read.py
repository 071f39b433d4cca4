"""A resume's cold load is one statement on SQLite (issue 23 item 8).

``load_state`` on a log just opened reads the run's newest snapshot, the
snapshots its chain builds on, and the events after it in one statement
(``SqliteEventLog.cold_read``), on the calling thread. Counted, not timed:
the statements the read connection runs (``set_trace_callback``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentlog.errors import UnknownRunError
from agentlog.eventlog import Event, RunStarted, Snapshot, TaskCompleted
from agentlog.eventlog.events import utcnow
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.eventlog.sqlite._cold_read import CHAIN_ROWS
from agentlog.projector import fold, load_state
from agentlog.projector._fold import apply
from agentlog.projector._snapshots import SnapshotChain
from agentlog.projector._state import RunState

RUN = "cold"


def _events(n: int) -> list[Event]:
    started = RunStarted("wf", "1", None, "sync", "fp")
    return [
        Event(RUN, 1, started, writer_epoch=1),
        *(
            Event(RUN, seq, TaskCompleted(f"k{seq}", seq), writer_epoch=1)
            for seq in range(2, n + 1)
        ),
    ]


async def _write(path: Path, events: list[Event], snapshot_at: list[int]) -> None:
    async with SqliteEventLog(path) as log:
        await log.claim_writer(RUN)
        await log.append(events)
        live, chain = RunState(), SnapshotChain(4)
        for event in events:
            apply(live, event)
            if event.seq in snapshot_at:
                await log.save_snapshot(chain.encode(live))


def _traced(log: SqliteEventLog) -> list[str]:
    """The statements the opener's read connection runs from now on."""
    statements: list[str] = []
    conn: sqlite3.Connection = log._reads._local.conn
    conn.set_trace_callback(statements.append)
    return statements


@pytest.mark.parametrize("snapshot_at", [[], [40], [10, 20, 30, 40]])
async def test_a_cold_load_is_one_statement(tmp_path: Path, snapshot_at: list[int]) -> None:
    path, events = tmp_path / "log.db", _events(50)
    await _write(path, events, snapshot_at)
    async with SqliteEventLog(path) as log:
        statements = _traced(log)
        state = await load_state(log, RUN)
    assert state.to_dict() == fold(events).to_dict()
    assert len(statements) == 1, statements


async def test_a_cold_read_returns_the_chain_and_the_tail(tmp_path: Path) -> None:
    path, events = tmp_path / "log.db", _events(50)
    await _write(path, events, [10, 20, 30, 40])
    async with SqliteEventLog(path, read_batch=4) as log:
        cold = log.cold_read(RUN)
        assert cold is not None
        assert cold.snapshots[0].seq == 40  # with its chain's, if a delta
        assert [row[0] for row in cold.rows] == [41, 42, 43, 44] and not cold.complete
        at = log.cold_read(RUN, upto_seq=25)
        assert at is not None and at.snapshots[0].seq == 20
        assert [row[0] for row in at.rows] == [21, 22, 23, 24] and not at.complete
        whole = log.cold_read(RUN, upto_seq=22)
        assert whole is not None and whole.complete and len(whole.rows) == 2
        assert (await load_state(log, RUN, at_seq=25)).to_dict() == fold(events[:25]).to_dict()


async def test_an_unknown_or_damaged_run_is_left_to_the_usual_path(tmp_path: Path) -> None:
    path, events = tmp_path / "log.db", _events(20)
    await _write(path, events, [10])
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM events WHERE run_id = ? AND seq = 15", (RUN,))
    async with SqliteEventLog(path) as log:
        assert log.cold_read("nobody") is None
        with pytest.raises(UnknownRunError):
            await load_state(log, "nobody")
        assert log.cold_read(RUN) is None  # a gap: the usual path names it


async def test_a_chain_longer_than_the_statement_fetches_is_left_to_the_usual_path(
    tmp_path: Path,
) -> None:
    """The statement's LIMIT allows a batch of events plus the run row and
    ``CHAIN_ROWS`` snapshots; a longer chain crowds out the events (here its
    own newest links too), which the cold read never takes for the run."""
    path, events = tmp_path / "log.db", _events(90)
    await _write(path, events, [])
    async with SqliteEventLog(path, keep_snapshots=100) as log:
        for seq in range(1, 81):  # a base at 1 and 79 deltas on it (opaque bytes)
            await log.save_snapshot(Snapshot(RUN, seq, b"link", utcnow(), 0 if seq == 1 else 1))
    async with SqliteEventLog(path, read_batch=4) as log:
        assert CHAIN_ROWS < 80
        assert log.cold_read(RUN) is None
        fits = log.cold_read(RUN, upto_seq=CHAIN_ROWS - 4)  # a chain of 60: it fits
        assert fits is not None and fits.complete and not fits.rows
        assert [s.seq for s in fits.snapshots] == list(range(CHAIN_ROWS - 4, 0, -1))
