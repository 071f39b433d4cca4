"""A group of appends to runs the log knows is written in a few statements, not two per append.

In a group whose appends each follow the run row the log's last commit
left (the steady state of many runs in sync durability), the run rows are
updated with one conditional ``UPDATE ... FROM (VALUES ...)`` and the events
inserted with one multi-row ``INSERT``. Each statement is one trip into
SQLite from the worker thread, which must take the GIL back after every
one. These tests pin the statement count and that every way the file can
move on behind the log (a newer writer, another log's append, a row the
index does not know of) still fails only that append, with the others of
the group committed.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from agentlog.errors import ConflictError, FencedError
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.eventlog.sqlite.test_group_commit import (
    ev,
    outcomes,
    seqs,
    submit_all,
    traced,
    worker_held,
)

RUNS = 40


def written(statements: list[str]) -> list[str]:
    """The statements that read or write rows (not BEGIN, COMMIT or savepoints).

    sqlite3's trace reports a statement again for each run of a trigger it
    fires (``run_counts``'), with the same text: those repeats are one trip.
    """
    control = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "PRAGMA")
    trips = [s for i, s in enumerate(statements) if i == 0 or s != statements[i - 1]]
    return [s for s in trips if not s.startswith(control)]


async def known_runs(log: SqliteEventLog, count: int) -> dict[str, int]:
    """``count`` claimed runs, each with seq 1 appended through ``log`` (so it knows their rows)."""
    epochs = {f"r{i}": await log.claim_writer(f"r{i}") for i in range(count)}
    for run_id, epoch in epochs.items():
        await log.append([ev(run_id, 1, epoch)])
    return epochs


async def test_a_group_of_known_runs_is_written_in_a_few_statements(log_path: Path) -> None:
    async with SqliteEventLog(log_path) as log:
        epochs = await known_runs(log, RUNS)
        statements = await traced(log)
        with worker_held(log):
            tasks = await submit_all(
                [
                    log.append([ev(run_id, 2, epoch), ev(run_id, 3, epoch)])
                    if i % 2
                    else log.append([ev(run_id, 2, epoch)])
                    for i, (run_id, epoch) in enumerate(epochs.items())
                ]
            )
        assert await outcomes(tasks) == [None] * RUNS
        assert statements.count("COMMIT") == 1
        assert len(written(statements)) <= 3, written(statements)
        for i, run_id in enumerate(epochs):
            last = 3 if i % 2 else 2
            assert await seqs(log, run_id) == list(range(1, last + 1))
            info = await log.find_run(run_id)
            assert info is not None and info.last_seq == last and info.steps == 0
        # The next group goes the same way: the rows it left are known.
        statements.clear()
        with worker_held(log):
            tasks = await submit_all(
                [
                    log.append([ev(run_id, 4 if i % 2 else 3, epoch)])
                    for i, (run_id, epoch) in enumerate(epochs.items())
                ]
            )
        assert await outcomes(tasks) == [None] * RUNS
        assert len(written(statements)) <= 3, written(statements)


async def test_a_fenced_or_overtaken_run_fails_alone_in_a_grouped_write(log_path: Path) -> None:
    async with SqliteEventLog(log_path) as log, SqliteEventLog(log_path) as other:
        epochs = await known_runs(log, RUNS)
        newer = await other.claim_writer("r3")  # r3's writer through `log` is fenced
        await other.append([ev("r5", 2, epochs["r5"])])  # r5's seq 2 is taken
        with worker_held(log):
            tasks = await submit_all(
                [log.append([ev(run_id, 2, epoch)]) for run_id, epoch in epochs.items()]
            )
        results = await outcomes(tasks)
        assert isinstance(results[3], FencedError) and results[3].run_id == "r3"
        assert isinstance(results[5], ConflictError) and results[5].run_id == "r5"
        assert [r for i, r in enumerate(results) if i not in (3, 5)] == [None] * (RUNS - 2)
        for run_id in epochs:
            assert await seqs(log, run_id) == ([1] if run_id == "r3" else [1, 2]), run_id
        info = await log.find_run("r3")
        assert info is not None and info.last_seq == 1 and info.writer_epoch == newer


async def test_a_seq_the_table_holds_fails_alone_and_leaves_its_row(log_path: Path) -> None:
    """The index says seq 2 is free, the table holds it: the grouped INSERT fails,
    and only that append is refused; its run row stays as it was."""
    async with SqliteEventLog(log_path) as log:
        epochs = await known_runs(log, RUNS)
        with closing(sqlite3.connect(log_path)) as conn, conn:
            conn.execute(
                "INSERT INTO events SELECT run_id, 2, type, ts, schema_v, writer_epoch, "
                "payload, checksum FROM events WHERE run_id = 'r7' AND seq = 1"
            )
        with worker_held(log):
            tasks = await submit_all(
                [log.append([ev(run_id, 2, epoch)]) for run_id, epoch in epochs.items()]
            )
        results = await outcomes(tasks)
        assert isinstance(results[7], ConflictError) and results[7].run_id == "r7"
        assert [r for i, r in enumerate(results) if i != 7] == [None] * (RUNS - 1)
        with closing(sqlite3.connect(log_path)) as conn:
            last = conn.execute("SELECT last_seq FROM runs WHERE run_id = 'r7'").fetchone()
        assert last == (1,)
        for i, run_id in enumerate(epochs):
            if i != 7:
                assert await seqs(log, run_id) == [1, 2]
