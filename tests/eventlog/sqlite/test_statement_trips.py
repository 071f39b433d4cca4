"""A small batch costs its commit no more statements than a single event.

Each statement is one trip of the log's worker thread into SQLite, after
which it must take the GIL back from the event loop (busy with the other
runs in sync durability). A batch of a few events (a step's events) is one
multi-row INSERT, which SQLite applies or refuses whole, so it needs no
savepoint of its own; only a batch too big for one statement still has one,
and its rows go in by multi-row INSERTs of ``CHUNK_ROWS`` rows (session 33),
not one statement run per row.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from agentlog.errors import ConflictError
from agentlog.eventlog._row_format import event_rows
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.eventlog.sqlite._group_commit import CHUNK_ROWS, ONE_STATEMENT_ROWS
from tests.eventlog.sqlite.test_known_run_rows import ev, seqs, stored


def trips(statements: list[str]) -> list[str]:
    """The statements run, each once: sqlite3's trace reports a statement
    again, with the same text, for each run of a trigger it fires."""
    return [s for i, s in enumerate(statements) if i == 0 or s != statements[i - 1]]


async def test_a_small_batch_is_one_insert_and_no_savepoint(log_path: Path) -> None:
    async with SqliteEventLog(log_path) as log:
        epoch = await log.claim_writer("r")
        statements: list[str] = []
        await log._call(log._conn.set_trace_callback, statements.append)
        await log.append([ev("r", 1, epoch), ev("r", 2, epoch)])  # the row is read
        await log.append([ev("r", seq, epoch) for seq in range(3, 6)])  # the row is known
        await log._call(log._conn.set_trace_callback, None)
        ran = trips(statements)
        assert not [s for s in ran if s.startswith(("SAVEPOINT", "RELEASE"))], ran
        assert len([s for s in ran if s.startswith("INSERT INTO events")]) == 2, ran
        assert await seqs(log, "r") == [1, 2, 3, 4, 5]
        assert stored(log_path, "r")[1] == (5, 0, epoch)


@pytest.mark.parametrize("size", [3, ONE_STATEMENT_ROWS + 5, 2 * CHUNK_ROWS + 5])
async def test_a_batch_refused_halfway_leaves_nothing(log_path: Path, size: int) -> None:
    """The table holds a seq in the middle of the batch: none of its rows stays
    (for the biggest size, the rows of the first INSERT were written before the
    second one was refused)."""
    async with SqliteEventLog(log_path) as log:
        epoch = await log.claim_writer("r")
        await log.append([ev("r", 1, epoch)])
        middle = 2 + size // 2  # not the first: the rows before it would go in
        with closing(sqlite3.connect(log_path)) as conn, conn:
            conn.execute(
                "INSERT INTO events SELECT run_id, ?, type, ts, schema_v, writer_epoch, "
                "payload, checksum FROM events WHERE run_id = 'r' AND seq = 1",
                (middle,),
            )
        with pytest.raises(ConflictError):
            await log.append([ev("r", seq, epoch) for seq in range(2, 2 + size)])
        assert stored(log_path, "r") == ([(1, epoch), (middle, epoch)], (1, 0, epoch))
        await log.append([ev("r", 2, epoch)])  # the row was left as it was
        assert stored(log_path, "r")[1] == (2, 0, epoch)


async def test_a_big_batch_is_one_insert_a_chunk_of_rows(log_path: Path) -> None:
    """A batch of 1,000 events is 9 INSERT statements (8 of CHUNK_ROWS rows and
    the rest), under one savepoint, and stores event_rows' rows as they are."""
    async with SqliteEventLog(log_path) as log:
        epoch = await log.claim_writer("r")
        batch = [ev("r", seq, epoch) for seq in range(1, 1001)]
        statements: list[str] = []
        await log._call(log._conn.set_trace_callback, statements.append)
        await log.append(batch)
        await log._call(log._conn.set_trace_callback, None)
        inserts = [s for s in statements if s.startswith("INSERT INTO events")]
        assert len(inserts) == -(-1000 // CHUNK_ROWS) == 9, len(inserts)
        assert len([s for s in statements if s.startswith("SAVEPOINT")]) == 1
    with closing(sqlite3.connect(log_path)) as conn:
        rows = conn.execute(
            "SELECT run_id, seq, type, ts, schema_v, writer_epoch, payload, checksum "
            "FROM events WHERE run_id = 'r' ORDER BY seq"
        ).fetchall()
    assert rows == event_rows(batch, epoch, None)
