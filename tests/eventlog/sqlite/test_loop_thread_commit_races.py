"""The commit on the event loop's thread, with other loops, threads and processes.

Two event loops on two threads may share one log. Each case here once hung
or committed a group twice (session 32's review); a hang is bounded by a
generous ``wait_for`` or thread join and reported as a failure, never timed.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from agentlog.errors import BackendUnavailableError
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.eventlog.sqlite import _group_commit as group_commit
from tests.eventlog.sqlite.test_group_commit import ev, outcomes, seqs, submit_all, worker_held
from tests.eventlog.sqlite.test_loop_thread_commit import commits_by_thread

_GENEROUS = 60.0


@pytest.fixture
async def log(log_path: Path) -> AsyncIterator[SqliteEventLog]:
    async with SqliteEventLog(log_path) as log:
        yield log


def _in_thread(fn: Callable[[], Any]) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)
    thread.start()
    return thread


def test_a_thread_holding_the_connection_can_queue_while_another_asks_for_it(
    tmp_path: Path,
) -> None:
    """Loop A commits on its thread and finds the write lock busy: it queues the
    group on the worker thread while loop B's thread asks for the connection.
    B must not wait for A's hold while keeping A from queueing (the deadlock)."""
    log = SqliteEventLog(tmp_path / "x.db")
    worker = log._worker
    assert worker.hold_if_idle()  # loop A, committing on its thread
    asked: list[bool] = []
    b = _in_thread(lambda: asked.append(worker.hold_if_idle()))  # loop B's _flush
    # B either answered or is waiting for A's hold: then A queues its group.
    while b.is_alive() and not worker._counting.locked():
        b.join(0.001)
    poster = _in_thread(lambda: worker.post(lambda: None))
    poster.join(_GENEROUS)
    queued = not poster.is_alive()
    worker.release()  # ends the hang, if any, so the threads can finish
    b.join(_GENEROUS)
    poster.join(_GENEROUS)
    assert queued, "a thread holding the connection could not queue a call"
    if asked == [True]:
        worker.release()
    worker.stop()
    log._db.close()
    log._reads.close()


def test_loops_on_threads_keep_committing_while_another_writer_takes_the_lock(
    tmp_path: Path,
) -> None:
    """Three loops on three threads append to one log while another connection
    keeps taking the file's write lock: every loop finishes its appends."""
    path = tmp_path / "x.db"
    log = SqliteEventLog(path)
    stop = threading.Event()
    done: dict[str, int] = {}

    def writer(name: str) -> None:
        async def main() -> None:
            for seq in range(1, 201):
                await log.append([ev(name, seq)], durable=False)
            done[name] = 200

        asyncio.run(main())

    def locker() -> None:
        with closing(sqlite3.connect(path, isolation_level=None, timeout=_GENEROUS)) as other:
            while not stop.is_set():
                other.execute("BEGIN IMMEDIATE")
                stop.wait(0.0005)
                other.execute("COMMIT")
                stop.wait(0.0005)

    lock_thread = _in_thread(locker)
    writers = [_in_thread(functools.partial(writer, name)) for name in "ABC"]
    for thread in writers:
        thread.join(_GENEROUS)
    hung = [thread.is_alive() for thread in writers]
    stop.set()
    lock_thread.join(_GENEROUS)
    assert hung == [False] * 3 and done == dict.fromkeys("ABC", 200), (hung, done)

    async def check() -> None:
        for name in "ABC":
            assert await seqs(log, name) == list(range(1, 201))
        await log.close()

    asyncio.run(check())


def test_a_group_whose_loop_stopped_is_committed_by_the_next_append(tmp_path: Path) -> None:
    """The loop that opened a group stops before committing it: an append from
    another loop joins the group and commits it, and does not hang."""
    log = SqliteEventLog(tmp_path / "x.db")
    first = asyncio.new_event_loop()
    stranded: list[asyncio.Future[None]] = []

    async def fire_and_forget() -> None:
        stranded.append(asyncio.ensure_future(log.append([ev("a", 1)])))

    first.run_until_complete(fire_and_forget())  # stops with the group open

    async def later() -> None:
        await asyncio.wait_for(log.append([ev("b", 1)]), _GENEROUS)
        assert await seqs(log, "b") == [1]
        assert await seqs(log, "a") == [1]  # the stranded append committed with it

    try:
        asyncio.run(later())
        first.run_until_complete(asyncio.wait_for(stranded[0], _GENEROUS))  # told, once it runs
    finally:
        first.close()
        asyncio.run(log.close())


@pytest.mark.parametrize("where", ["worker busy", "two appends"])
async def test_a_group_sealed_from_another_thread_while_queued_commits_once(
    log: SqliteEventLog, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another loop's thread seals the open group just as this loop queues it:
    one commit, each caller told once."""
    await log.append([ev("r", 1)])
    commits: list[int] = []
    commit = log._group._commit

    def counting(group: list[Any]) -> Any:
        commits.append(id(group))
        return commit(group)

    sealed: list[bool] = []

    def seal_first(then: Callable[..., Any], *args: Any) -> Any:
        if not sealed:  # the other thread's seal lands just before
            sealed.append(True)
            _in_thread(log._group.seal).join(_GENEROUS)
        return then(*args)

    def arm() -> None:  # once the worker thread is held, if it is to be
        monkeypatch.setattr(log._group, "_commit", counting)
        monkeypatch.setattr(log._group, "_queue", functools.partial(seal_first, log._group._queue))
        monkeypatch.setattr(log._worker, "post", functools.partial(seal_first, log._worker.post))

    errors: list[Any] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: errors.append(context))
    if where == "worker busy":
        with worker_held(log):
            arm()
            tasks = await submit_all([log.append([ev("r", 2)])])
    else:
        arm()
        tasks = await submit_all([log.append([ev("r", 2)]), log.append([ev("s", 1)])])
    assert await outcomes(tasks) == [None] * len(tasks)
    await log._worker.run(lambda: None)  # every call posted so far has run
    assert sealed and len(commits) == 1, commits
    assert errors == []
    assert await seqs(log, "r") == [1, 2]


async def test_reads_on_the_worker_thread_wait_for_the_lock_after_a_loop_commit(
    log: SqliteEventLog,
) -> None:
    """The loop's commit never waits for the write lock (busy_timeout 0); the
    worker thread's reads after it wait for it as configured (5 s)."""
    commits = commits_by_thread(log)
    await log.append([ev("r", 1)])
    assert commits == [threading.get_ident()]
    rows = await log._worker.run(functools.partial(log._db.query, "PRAGMA busy_timeout", ()))
    assert rows == [(5000,)]


async def test_close_unused_with_a_group_open_declines_and_the_log_stays_whole(
    log_path: Path,
) -> None:
    log = SqliteEventLog(log_path)
    await log.append([ev("r", 1)])  # committed on the loop: the worker never started
    append = asyncio.ensure_future(log.append([ev("r", 2)]))
    await asyncio.sleep(0)  # in the open group, not committed yet
    assert not log._worker.started
    assert log.close_unused() is False
    await asyncio.wait_for(append, _GENEROUS)
    assert await seqs(log, "r") == [1, 2]
    await log.close()
    fresh = SqliteEventLog(log_path)
    assert fresh.close_unused() is True


async def test_a_failed_commit_on_the_loop_leaves_no_transaction_and_the_next_succeeds(
    log: SqliteEventLog,
) -> None:
    await log.append([ev("r", 1)])
    conn = log._db.conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")  # as on a full disk
    commits = commits_by_thread(log)
    with pytest.raises(BackendUnavailableError, match="disk is full") as failed:
        await log.append([ev("r", 2, size=200_000)])
    assert failed.value.retryable
    assert not conn.in_transaction
    assert not log._worker.started  # failed on the loop's thread, not handed over
    conn.execute("PRAGMA max_page_count = 4294967294")
    await log.append([ev("r", 2)])
    assert commits == [threading.get_ident()]
    assert await seqs(log, "r") == [1, 2]


async def test_a_busy_lock_after_begin_on_the_loop_then_the_worker_writes_once(
    log: SqliteEventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLITE_BUSY after the loop's transaction wrote its rows: rolled back, and
    the worker thread's commit writes the batch once."""
    await log.append([ev("r", 1)])
    loop_thread = threading.get_ident()
    apply = group_commit.apply_batches
    calls: list[bool] = []

    def busy_once(*args: Any) -> Any:
        result = apply(*args)  # the rows are written in the transaction
        calls.append(threading.get_ident() == loop_thread)
        if len(calls) == 1:
            error = sqlite3.OperationalError("database is locked")
            error.sqlite_errorcode = 5  # type: ignore[attr-defined]  # SQLITE_BUSY
            raise error
        return result

    monkeypatch.setattr(group_commit, "apply_batches", busy_once)
    commits = commits_by_thread(log)
    await asyncio.wait_for(log.append([ev("r", 2), ev("r", 3)]), _GENEROUS)
    assert calls == [True, False]  # tried on the loop, done on the worker thread
    assert len(commits) == 1 and commits[0] != loop_thread
    assert log._group.commits == 2 and log._group.appends == 2
    assert await seqs(log, "r") == [1, 2, 3]
    await log.append([ev("r", 4)])
    assert await seqs(log, "r") == [1, 2, 3, 4]


async def test_close_waits_for_another_loops_commit_on_the_connection(log_path: Path) -> None:
    """close() never closes the connection under another loop's thread that
    holds it to commit (the worker thread never started)."""
    log = SqliteEventLog(log_path)
    await log.append([ev("r", 1)])
    assert not log._worker.started
    assert log._worker.hold_if_idle()  # as another loop's thread, committing
    try:
        closing = asyncio.ensure_future(log.close())
        for _ in range(5):
            await asyncio.sleep(0)
        assert log._db.opened  # not closed under the holder
    finally:
        log._worker.release()
    await asyncio.wait_for(closing, _GENEROUS)
    assert not log._db.opened
