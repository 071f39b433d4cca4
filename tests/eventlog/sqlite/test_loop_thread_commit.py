"""Where a group of appends commits (issue 23 items 6 and 7).

A durable append used to hand its group to the log's worker thread at once
and wait for the thread to wake the loop again: two thread hand-overs per
commit, and the first of several concurrent appends committed alone. Now a
group commits one loop iteration after it opened, so every append made in
that iteration joins it; a lone append commits on the loop's own thread when
the worker thread has nothing queued or running, a group of several on the
worker thread. Pinned by counting, never by timing: which thread ran each
COMMIT (sqlite3's statement trace), how many COMMITs a set of concurrent
appends took, and whether the worker thread ever started.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import pytest

from agentlog.errors import ConflictError, FencedError
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.eventlog.sqlite.test_group_commit import ev, outcomes, seqs, submit_all, worker_held

_GENEROUS = 60.0


@pytest.fixture
async def log(log_path: Path) -> AsyncIterator[SqliteEventLog]:
    async with SqliteEventLog(log_path) as log:
        yield log


def commits_by_thread(log: SqliteEventLog) -> list[int]:
    """The thread id of every COMMIT the log's writing connection runs from now on.

    Set on the calling thread: the worker thread is not started to set it.
    """
    threads: list[int] = []

    def trace(statement: str) -> None:
        if statement == "COMMIT":
            threads.append(threading.get_ident())

    log._db.conn.set_trace_callback(trace)
    return threads


async def test_a_lone_durable_append_commits_on_the_loop_thread(log: SqliteEventLog) -> None:
    commits = commits_by_thread(log)
    for seq in range(1, 6):
        await log.append([ev("r", seq)])
    await log.append([ev("r", 6), ev("r", 7)], durable=False)
    assert commits == [threading.get_ident()] * 6
    assert not log._worker.started  # no thread was needed, none was started
    assert await seqs(log, "r") == list(range(1, 8))


async def test_appends_made_in_one_loop_iteration_share_one_commit(
    log: SqliteEventLog,
) -> None:
    """With the worker thread idle, the first append does not commit alone."""
    commits = commits_by_thread(log)
    tasks = await submit_all([log.append([ev(f"r{i}", 1), ev(f"r{i}", 2)]) for i in range(50)])
    assert await outcomes(tasks) == [None] * 50
    assert len(commits) == 1
    assert commits[0] != threading.get_ident()  # several runs' group: the worker thread's
    assert log._group.commits == 1 and log._group.appends == 50
    for i in range(50):
        assert await seqs(log, f"r{i}") == [1, 2]


async def test_the_next_round_of_appends_shares_the_next_commit(log: SqliteEventLog) -> None:
    """Runs resumed by one commit append in the same iteration: one commit per round."""
    commits = commits_by_thread(log)

    async def writer(run_id: str) -> None:
        for seq in range(1, 11):
            await log.append([ev(run_id, seq)])

    await asyncio.wait_for(asyncio.gather(*(writer(f"r{i}") for i in range(20))), _GENEROUS)
    assert len(commits) == 10  # 200 appends, 20 per commit


async def test_a_group_waits_for_the_busy_worker_thread_then_commits_once(
    log: SqliteEventLog,
) -> None:
    """A group opened while the thread runs a call commits after it, never beside it."""
    await log.append([ev("r", 1)])
    commits = commits_by_thread(log)
    with worker_held(log):
        tasks = await submit_all([log.append([ev(f"w{i}", 1)]) for i in range(10)])
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert not any(task.done() for task in tasks)  # waiting, not committed beside the call
        assert commits == []
    assert await outcomes(tasks) == [None] * 10
    assert len(commits) == 1


async def test_the_fence_and_the_seq_check_hold_on_the_loop_thread(log: SqliteEventLog) -> None:
    epoch = await log.claim_writer("r")
    await log.append([ev("r", 1, epoch)])
    await log.claim_writer("r")  # a newer writer
    commits = commits_by_thread(log)
    tasks = await submit_all(
        [log.append([ev("r", 2, epoch)]), log.append([ev("s", 2)]), log.append([ev("t", 1)])]
    )
    results = await outcomes(tasks)
    assert isinstance(results[0], FencedError)
    assert isinstance(results[1], ConflictError)
    assert results[2] is None
    assert len(commits) == 1
    commits.clear()
    with pytest.raises(FencedError):  # alone: checked and refused on the loop's thread
        await log.append([ev("r", 2, epoch)])
    with pytest.raises(ConflictError):
        await log.append([ev("t", 1)])
    await log.append([ev("t", 2)])
    assert commits == [threading.get_ident()] * 3
    assert await seqs(log, "r") == [1] and await seqs(log, "t") == [1, 2]


async def test_another_process_holding_the_write_lock_never_blocks_the_loop(
    log: SqliteEventLog, log_path: Path
) -> None:
    """The loop does not wait for the file's write lock: the worker thread does."""
    await log.append([ev("r", 1)])
    commits = commits_by_thread(log)
    ticks = 0
    with closing(sqlite3.connect(log_path, isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")  # as another process's writer would
        append = asyncio.ensure_future(log.append([ev("r", 2)]))
        while ticks < 20:  # the loop keeps running while the append waits
            await asyncio.sleep(0)
            ticks += 1
        assert not append.done()
        other.execute("COMMIT")
    await asyncio.wait_for(append, _GENEROUS)
    assert len(commits) == 1 and commits[0] != threading.get_ident()  # the worker's
    assert await seqs(log, "r") == [1, 2]
    commits.clear()
    await log.append([ev("r", 3)])  # the lock is free again: back on the loop thread
    assert commits == [threading.get_ident()]


async def test_close_commits_an_open_group(log_path: Path) -> None:
    log = SqliteEventLog(log_path)
    append = asyncio.ensure_future(log.append([ev("r", 1)]))
    await asyncio.sleep(0)  # the append is in the open group, not committed yet
    await log.close()
    await asyncio.wait_for(append, _GENEROUS)
    async with SqliteEventLog(log_path, read_only=True) as again:
        assert await seqs(again, "r") == [1]


async def test_after_a_group_on_the_worker_thread_a_lone_append_commits_on_the_loop(
    log: SqliteEventLog,
) -> None:
    """The thread settles a group's callers once it is idle: the next lone append
    finds it so, and is not queued behind a call that has already ended."""
    commits = commits_by_thread(log)
    for seq in range(1, 21):
        tasks = await submit_all([log.append([ev("a", seq)]), log.append([ev("b", seq)])])
        assert await outcomes(tasks) == [None, None]
        await log.append([ev("c", seq)])
    here = threading.get_ident()
    assert [thread == here for thread in commits] == [False, True] * 20
