"""A group of appends to runs the log knows (the steady state of many runs in
sync durability): every way the file can move on behind the log (a newer
writer, another log's append, a row the index does not know of) fails only
that append, with the others of the group committed and that run's row as it was.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from agentlog.errors import ConflictError, FencedError
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.eventlog.sqlite.test_group_commit import ev, outcomes, seqs, submit_all, worker_held

RUNS = 40


async def known_runs(log: SqliteEventLog, count: int) -> dict[str, int]:
    """``count`` claimed runs, each with seq 1 appended through ``log`` (so it knows their rows)."""
    epochs = {f"r{i}": await log.claim_writer(f"r{i}") for i in range(count)}
    for run_id, epoch in epochs.items():
        await log.append([ev(run_id, 1, epoch)])
    return epochs


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
