"""A writer's appends do not read the run index row again, and stay fenced.

The SQLite log remembers the run row its last commit left; the next append
of the same writer updates the row only if it still has the epoch and last
seq the log knows, in the commit's transaction. These tests pin that the
row is not read on that path, and that every way the file can move on
behind the log's back (a newer writer's claim, another log's append, a row
the index does not know of) still gets the error the append deserves, with
nothing written.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from agentlog.errors import ConflictError, FencedError
from agentlog.eventlog.events import Event, TaskCompleted
from agentlog.eventlog.sqlite import SqliteEventLog


def ev(run_id: str, seq: int, epoch: int) -> Event:
    result: dict[str, Any] = {"n": seq}
    return Event(run_id, seq, TaskCompleted(key=f"k{seq}", result=result), writer_epoch=epoch)


async def seqs(log: SqliteEventLog, run_id: str) -> list[int]:
    return [event.seq async for event in log.read(run_id)]


def stored(path: Path, run_id: str) -> tuple[list[tuple[int, int]], tuple[int, int, int]]:
    """The run's (seq, epoch) rows and its index row's (last_seq, steps, epoch), read raw."""
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute(
            "SELECT seq, writer_epoch FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
        ).fetchall()
        index = conn.execute(
            "SELECT last_seq, steps, writer_epoch FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
    return rows, index


async def test_a_writers_next_append_reads_no_run_row(log_path: Path) -> None:
    async with SqliteEventLog(log_path) as log:
        epoch = await log.claim_writer("r")
        await log.append([ev("r", 1, epoch)])
        statements: list[str] = []
        await log._call(log._conn.set_trace_callback, statements.append)
        await log.append([ev("r", 2, epoch)])
        await log.append([ev("r", 3, epoch), ev("r", 4, epoch)])
        await log._call(log._conn.set_trace_callback, None)
        assert not [s for s in statements if "FROM runs" in s], statements
        assert await seqs(log, "r") == [1, 2, 3, 4]
        info = await log.find_run("r")
        assert info is not None and info.last_seq == 4 and info.writer_epoch == epoch


async def test_a_writer_fenced_by_another_log_is_refused(log_path: Path) -> None:
    """The old writer's log still remembers the run row of its epoch."""
    async with SqliteEventLog(log_path) as old, SqliteEventLog(log_path) as new:
        stale = await old.claim_writer("r")
        await old.append([ev("r", 1, stale)])
        await old.append([ev("r", 2, stale)])
        current = await new.claim_writer("r")
        # The next seq the stale writer knows of is still free.
        with pytest.raises(FencedError):
            await old.append([ev("r", 3, stale)])
        with pytest.raises(FencedError):
            await old.append([ev("r", 3, stale), ev("r", 4, stale)])
        assert stored(log_path, "r") == ([(1, stale), (2, stale)], (2, 0, current))
        await new.append([ev("r", 3, current)])
        with pytest.raises(FencedError):  # and once the new writer wrote it
            await old.append([ev("r", 4, stale)])
        assert stored(log_path, "r") == ([(1, stale), (2, stale), (3, current)], (3, 0, current))


async def test_an_append_by_another_log_is_a_conflict_then_read_again(log_path: Path) -> None:
    async with SqliteEventLog(log_path) as one, SqliteEventLog(log_path) as other:
        epoch = await one.claim_writer("r")
        await one.append([ev("r", 1, epoch)])
        await other.append([ev("r", 2, epoch)])  # the same epoch, another log
        with pytest.raises(ConflictError):
            await one.append([ev("r", 2, epoch)])
        await one.append([ev("r", 3, epoch)])  # the row is read again: seq 3 is next
        assert stored(log_path, "r") == ([(1, epoch), (2, epoch), (3, epoch)], (3, 0, epoch))


async def test_an_event_the_index_does_not_know_leaves_the_row_as_it_was(
    log_path: Path,
) -> None:
    """The row was updated first, then the insert hit the unique key: both undone."""
    async with SqliteEventLog(log_path) as log:
        epoch = await log.claim_writer("r")
        await log.append([ev("r", 1, epoch)])
        with closing(sqlite3.connect(log_path)) as conn, conn:
            conn.execute(
                "INSERT INTO events SELECT run_id, 2, type, ts, schema_v, writer_epoch, "
                "payload, checksum FROM events WHERE run_id = 'r' AND seq = 1"
            )
        for batch in ([ev("r", 2, epoch)], [ev("r", 2, epoch), ev("r", 3, epoch)]):
            with pytest.raises(ConflictError):
                await log.append(batch)
            assert stored(log_path, "r") == ([(1, epoch), (2, epoch)], (1, 0, epoch))
        info = await log.find_run("r")
        assert info is not None and info.last_seq == 1


async def test_only_the_most_recently_appended_runs_are_remembered(
    log_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the bound, the run appended to longest ago is read again; nothing else changes."""
    from agentlog.eventlog.sqlite import _group_commit

    monkeypatch.setattr(_group_commit, "KNOWN_RUNS", 2)
    async with SqliteEventLog(log_path) as log:
        epochs = {run: await log.claim_writer(run) for run in ("a", "b", "c")}
        for run, epoch in epochs.items():
            await log.append([ev(run, 1, epoch)])
        statements: list[str] = []
        await log._call(log._conn.set_trace_callback, statements.append)
        await log.append([ev("c", 2, epochs["c"])])
        assert not [s for s in statements if "FROM runs" in s]
        await log.append([ev("a", 2, epochs["a"])])  # forgotten when c came in
        assert [s for s in statements if "FROM runs" in s]
        await log._call(log._conn.set_trace_callback, None)
        for run, epoch in epochs.items():
            assert stored(log_path, run)[1] == (2 if run != "b" else 1, 0, epoch)
