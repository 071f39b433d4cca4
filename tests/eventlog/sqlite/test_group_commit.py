"""Group commit on SQLite: appends that arrive while a commit is in progress share one.

Each test holds the log's worker thread on a gate (a real threading.Event)
while the appends are submitted, so that they all arrive "while a commit is
in progress" and form one group, whatever the machine's speed. The commits
are counted with sqlite3's own statement trace.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from agentlog.errors import BackendUnavailableError, ConflictError, FencedError, UnknownRunError
from agentlog.eventlog.events import Event, TaskCompleted
from agentlog.eventlog.sqlite import SqliteEventLog


def ev(run_id: str, seq: int, epoch: int = 0, size: int = 0) -> Event:
    result: dict[str, Any] = {"n": seq, "pad": "x" * size}
    return Event(run_id, seq, TaskCompleted(key=f"k{seq}", result=result), writer_epoch=epoch)


async def seqs(log: SqliteEventLog, run_id: str) -> list[int]:
    return [event.seq async for event in log.read(run_id)]


@pytest.fixture
async def log(log_path: Path) -> AsyncIterator[SqliteEventLog]:
    async with SqliteEventLog(log_path) as log:
        yield log


async def traced(log: SqliteEventLog) -> list[str]:
    """Every statement the log's connection runs from now on."""
    statements: list[str] = []
    await log._call(log._conn.set_trace_callback, statements.append)
    return statements


@contextmanager
def worker_held(log: SqliteEventLog) -> Iterator[None]:
    """Keep the log's worker thread busy (as during a long fsync) until the block ends."""
    gate = threading.Event()
    log._worker.post(lambda: gate.wait(timeout=60))
    try:
        yield
    finally:
        gate.set()


async def submit_all(calls: list[Awaitable[Any]]) -> list[asyncio.Task[Any]]:
    """Start every call; return once each has been handed to the log.

    An append hands its batch over before its first await, and tasks run
    their first step in creation order before this coroutine resumes.
    """
    tasks = [asyncio.ensure_future(call) for call in calls]
    await asyncio.sleep(0)
    return tasks


async def outcomes(tasks: list[asyncio.Task[Any]]) -> list[BaseException | None]:
    results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 60)
    return [r if isinstance(r, BaseException) else None for r in results]


async def test_appends_of_many_runs_share_one_commit(log: SqliteEventLog) -> None:
    statements = await traced(log)
    with worker_held(log):
        tasks = await submit_all([log.append([ev(f"r{i}", 1), ev(f"r{i}", 2)]) for i in range(50)])
    assert await outcomes(tasks) == [None] * 50
    assert statements.count("COMMIT") == 1
    for i in range(50):
        assert await seqs(log, f"r{i}") == [1, 2]
        info = await log.get_run(f"r{i}")
        assert info.last_seq == 2


async def test_a_conflict_or_a_fence_in_the_group_fails_only_its_own_append(
    log: SqliteEventLog,
) -> None:
    await log.append([ev("taken", 1)])
    fenced_epoch = await log.claim_writer("fenced")
    await log.append([ev("fenced", 1, fenced_epoch)])
    await log.claim_writer("fenced")  # a newer writer: epoch fenced_epoch is fenced
    statements = await traced(log)
    with worker_held(log):
        tasks = await submit_all(
            [
                *(log.append([ev(f"ok{i}", 1)]) for i in range(10)),
                log.append([ev("taken", 1)]),  # seq 1 is already there
                log.append([ev("fenced", 2, fenced_epoch)]),
                *(log.append([ev(f"ok{i}", 2)]) for i in range(10)),  # same runs, next seqs
                log.append([ev("gap", 2)]),  # the run has no seq 1
            ]
        )
    results = await outcomes(tasks)
    assert statements.count("COMMIT") == 1
    assert results[:10] == [None] * 10 and results[12:22] == [None] * 10
    assert isinstance(results[10], ConflictError) and results[10].run_id == "taken"
    assert isinstance(results[11], FencedError) and results[11].run_id == "fenced"
    assert isinstance(results[22], ConflictError) and results[22].run_id == "gap"
    for i in range(10):
        assert await seqs(log, f"ok{i}") == [1, 2]
    assert await seqs(log, "taken") == [1]
    assert await seqs(log, "fenced") == [1]
    assert await log.find_run("gap") is None


async def test_a_batch_that_fails_halfway_leaves_none_of_its_rows(
    log: SqliteEventLog, log_path: Path
) -> None:
    """The index says seq 2 is free, the table holds it: the batch's seq 1 must go too."""
    await log.append([ev("damaged", 1), ev("damaged", 2)])
    await log.append([ev("one", 1)])
    with closing(sqlite3.connect(log_path)) as conn, conn:
        conn.execute("DELETE FROM events WHERE run_id = 'damaged' AND seq = 1")
        conn.execute("UPDATE runs SET last_seq = 0 WHERE run_id IN ('damaged', 'one')")
    with worker_held(log):
        tasks = await submit_all(
            [
                log.append([ev("before", 1)]),
                log.append([ev("damaged", 1), ev("damaged", 2), ev("damaged", 3)]),
                log.append([ev("one", 1)]),  # a single row the table already holds
                log.append([ev("after", 1)]),
            ]
        )
    results = await outcomes(tasks)
    assert results[0] is None and results[3] is None
    assert isinstance(results[1], ConflictError) and isinstance(results[2], ConflictError)
    with closing(sqlite3.connect(log_path)) as conn:
        rows = conn.execute("SELECT run_id, seq FROM events WHERE run_id IN ('damaged', 'one')")
        last = conn.execute("SELECT run_id, last_seq FROM runs WHERE run_id IN ('damaged', 'one')")
        assert sorted(rows.fetchall()) == [("damaged", 2), ("one", 1)]
        assert sorted(last.fetchall()) == [("damaged", 0), ("one", 0)]
    assert await seqs(log, "before") == [1] and await seqs(log, "after") == [1]


async def test_disk_full_fails_every_append_of_the_group_and_records_none(
    log: SqliteEventLog,
) -> None:
    await log.append([ev("old", 1)])
    pages = (await log._call(log._db.query, "PRAGMA page_count", ()))[0][0]
    # The file may not grow: the big events need new pages, as on a full disk.
    await log._call(log._db.query, f"PRAGMA max_page_count = {pages}", ())
    with worker_held(log):
        tasks = await submit_all(
            [
                log.append([ev("old", 2)]),
                *(log.append([ev(f"new{i}", 1, size=20_000)]) for i in range(5)),
            ]
        )
    results = await outcomes(tasks)
    assert all(isinstance(r, BackendUnavailableError) for r in results), results
    assert all(r is results[0] for r in results)  # one failure, the same for every caller
    error = results[0]
    assert isinstance(error, BackendUnavailableError) and error.retryable
    assert "disk is full" in str(error)
    assert await seqs(log, "old") == [1]
    for i in range(5):
        assert await log.find_run(f"new{i}") is None
        with pytest.raises(UnknownRunError):
            await seqs(log, f"new{i}")
    # Space again: the very same appends go through.
    await log._call(log._db.query, "PRAGMA max_page_count = 4294967294", ())
    await log.append([ev("old", 2)])
    assert await seqs(log, "old") == [1, 2]


async def test_a_read_only_connection_fails_every_append_of_the_group(
    log: SqliteEventLog,
) -> None:
    await log.append([ev("a", 1)])
    await log._call(log._conn.execute, "PRAGMA query_only = ON")
    with worker_held(log):
        tasks = await submit_all([log.append([ev(r, 2 if r == "a" else 1)]) for r in "abc"])
    results = await outcomes(tasks)
    assert all(isinstance(r, BackendUnavailableError) for r in results), results
    assert "read-only" in str(results[0])
    await log._call(log._conn.execute, "PRAGMA query_only = OFF")
    assert await seqs(log, "a") == [1]
    assert await log.find_run("b") is None and await log.find_run("c") is None


async def test_no_append_overtakes_a_call_submitted_before_it(log: SqliteEventLog) -> None:
    """An append queued after a claim must see the claim, even with a group open before it."""
    await log.append([ev("r", 1)])
    with worker_held(log):
        tasks = await submit_all(
            [
                log.append([ev("other", 1)]),  # opens a group behind the held thread
                log.claim_writer("r"),  # epoch 1: fences epoch 0
                log.append([ev("r", 2, epoch=0)]),  # submitted after the claim
            ]
        )
    results = await outcomes(tasks)
    assert results[0] is None and results[1] is None
    assert isinstance(results[2], FencedError)
    assert await seqs(log, "r") == [1]


async def test_a_durable_and_a_buffered_append_in_one_group_commit_durably(
    log: SqliteEventLog,
) -> None:
    await log.append([ev("before", 1)], durable=False)  # the connection is at NORMAL now
    statements = await traced(log)
    with worker_held(log):
        tasks = await submit_all(
            [log.append([ev("fast", 1)], durable=False), log.append([ev("safe", 1)])]
        )
    assert await outcomes(tasks) == [None, None]
    assert statements.count("COMMIT") == 1
    assert statements.index("PRAGMA synchronous=FULL") < statements.index("COMMIT")


async def test_concurrent_runs_on_two_logs_of_one_file(log_path: Path) -> None:
    async with SqliteEventLog(log_path) as one, SqliteEventLog(log_path) as two:

        async def run(log: SqliteEventLog, run_id: str) -> None:
            for seq in range(1, 11):
                await log.append([ev(run_id, seq)])

        await asyncio.wait_for(
            asyncio.gather(*(run(one if i % 2 else two, f"r{i}") for i in range(40))), 120
        )
        for i in range(40):
            assert await seqs(one, f"r{i}") == list(range(1, 11))
