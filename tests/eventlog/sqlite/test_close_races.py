"""An append (or another call) racing another thread's ``close()`` of a SQLite log.

A call checks that the log is open, then hands its work over; another thread
(an AgentlogSaver closing, a second event loop) may close the log in between.
Each case closes the log at one exact point of the call, through a hook on
that point (the production path is unchanged), and asks that the call either
commits fully and reports success, or raises the closed log's typed error
having written nothing, and that neither the call nor ``close()`` hangs. A
hang is bounded by a generous ``wait_for`` or thread join and reported as a
failure, never timed.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from agentlog.errors import BackendUnavailableError
from agentlog.eventlog._worker_thread import WorkerThread
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.eventlog.sqlite.test_group_commit import ev

_GENEROUS = 60.0


def _in_thread(fn: Callable[[], Any]) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)
    thread.start()
    return thread


def _close_in_thread(log: SqliteEventLog) -> threading.Thread:
    """Another thread closing the log on its own event loop."""
    return _in_thread(lambda: asyncio.run(log.close()))


def _stored(path: Path, run_id: str) -> list[int]:
    """The run's seqs in the file, read by a connection of the test's own."""
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT seq FROM events WHERE run_id = ? ORDER BY seq", (run_id,))
        return [seq for (seq,) in rows]


def _closed_after_the_check(log: SqliteEventLog, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next call's closed check passes, then another thread closes the log
    whole before the call goes on."""
    check = log._check_open
    fired: list[bool] = []

    def then_closed() -> None:
        check()
        if not fired:
            fired.append(True)
            closer = _close_in_thread(log)
            closer.join(_GENEROUS)
            assert not closer.is_alive(), "close() hung"

    monkeypatch.setattr(log, "_check_open", then_closed)


async def _start_worker(log: SqliteEventLog) -> None:
    await log.claim_writer("other")
    assert log._worker.started


@pytest.mark.parametrize("worker", ["never started", "started"])
async def test_an_append_past_the_closed_check_fails_typed_and_writes_nothing(
    log_path: Path, monkeypatch: pytest.MonkeyPatch, worker: str
) -> None:
    """Closed between the append's check and its joining a group: the commit
    must not reopen the closed connection and write after close()."""
    log = SqliteEventLog(log_path)
    await log.append([ev("r", 1)])
    if worker == "started":
        await _start_worker(log)
    _closed_after_the_check(log, monkeypatch)
    with pytest.raises(BackendUnavailableError, match="is closed"):
        await asyncio.wait_for(log.append([ev("r", 2)]), _GENEROUS)
    assert not log._db.opened, "the closed log's connection was opened again"
    assert _stored(log_path, "r") == [1]


@pytest.mark.parametrize("worker", ["never started", "started"])
async def test_a_call_past_the_closed_check_fails_typed_and_does_not_hang(
    log_path: Path, monkeypatch: pytest.MonkeyPatch, worker: str
) -> None:
    """A claim (any call to the worker thread) submitted once close() stopped
    the thread must be told, not wait forever."""
    log = SqliteEventLog(log_path)
    await log.append([ev("r", 1)])
    if worker == "started":
        await _start_worker(log)
    _closed_after_the_check(log, monkeypatch)
    with pytest.raises(BackendUnavailableError, match="is closed"):
        await asyncio.wait_for(log.claim_writer("r"), _GENEROUS)
    assert not log._db.opened


async def test_an_inline_commit_that_found_the_lock_busy_races_close(
    log_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lone append's commit on the loop finds another process's write lock
    and lets go of the connection to hand its group to the worker thread;
    another thread's close() lands in between. The append must be committed
    (then reported) or refused with nothing written, and never left waiting
    on a worker thread that close() stopped."""
    log = SqliteEventLog(log_path)
    await log.append([ev("r", 1)])
    assert not log._worker.started
    locker = sqlite3.connect(log_path, isolation_level=None, check_same_thread=False)
    locker.execute("BEGIN IMMEDIATE")  # another process's write: the loop gives up
    release = log._worker.release
    closers: list[threading.Thread] = []

    def release_then_close() -> None:
        release()
        if closers:  # close()'s own release, or a later one
            return
        closers.append(closer := _close_in_thread(log))
        # Until close() is done, or waits for the worker thread behind the group.
        deadline = time.monotonic() + _GENEROUS
        while closer.is_alive() and log._worker._pending < 2 and time.monotonic() < deadline:
            closer.join(0.001)
        locker.execute("COMMIT")

    monkeypatch.setattr(log._worker, "release", release_then_close)
    append = asyncio.ensure_future(log.append([ev("r", 2)]))
    try:
        done, _ = await asyncio.wait({append}, timeout=_GENEROUS)
        assert done, "the append was never settled"
        error = append.exception()
        assert closers, "the commit on the loop did not find the lock busy"
        closers[0].join(_GENEROUS)
        assert not closers[0].is_alive(), "close() hung"
    finally:
        if locker.in_transaction:
            locker.execute("COMMIT")
        locker.close()
    assert not log._db.opened
    if error is None:
        assert _stored(log_path, "r") == [1, 2]
    else:
        assert isinstance(error, BackendUnavailableError), repr(error)
        assert _stored(log_path, "r") == [1]


async def test_a_call_queued_just_before_stop_runs_though_its_caller_never_started_the_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The log's worker thread, which a call starts only after queueing itself:
    stop() lands in between (a close() on another thread) and must run the
    call, not leave it behind a thread that never starts."""
    worker = WorkerThread("t", lambda: BackendUnavailableError("closed"))
    put = worker._put

    def put_then_stop(call: Any) -> None:
        put(call)
        stopper = _in_thread(worker.stop)
        stopper.join(_GENEROUS)
        assert not stopper.is_alive(), "stop() hung"

    monkeypatch.setattr(worker, "_put", put_then_stop)
    assert await asyncio.wait_for(worker.run(lambda: 7), _GENEROUS) == 7
    monkeypatch.undo()
    with pytest.raises(BackendUnavailableError, match="closed"):
        await worker.run(lambda: 8)
    with pytest.raises(BackendUnavailableError, match="closed"):
        worker.post(lambda: None)


def test_close_unused_racing_an_append_from_another_loop_closes_whole(
    log_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """close_unused() (a saver closing with no event loop) finds no group open;
    another loop's append, past its closed check, then opens one before the
    close goes on. Closing must not then need an event loop (it has none):
    the append is refused with nothing written, and the log closes whole."""
    log = SqliteEventLog(log_path)
    other = asyncio.new_event_loop()
    checked, go = threading.Event(), threading.Event()
    check = log._check_open

    def checked_then_wait() -> None:
        check()
        checked.set()
        go.wait(_GENEROUS)

    monkeypatch.setattr(log, "_check_open", checked_then_wait)
    appended: list[asyncio.Future[None]] = []

    async def fire_and_forget() -> None:  # the loop stops before it commits the group
        appended.append(asyncio.ensure_future(log.append([ev("a", 1)])))

    appender = _in_thread(lambda: other.run_until_complete(fire_and_forget()))
    assert checked.wait(_GENEROUS)
    close_reads = log._reads.close

    def reads_closed_then_append() -> None:  # inside close(), before the group is sealed
        close_reads()
        go.set()
        appender.join(_GENEROUS)

    monkeypatch.setattr(log._reads, "close", reads_closed_then_append)
    try:
        assert log.close_unused() is True
    finally:
        go.set()
        appender.join(_GENEROUS)
    assert not log._db.opened
    assert appended
    if appended[0].done():
        error = appended[0].exception()
    else:  # committed, and told to its loop, which stopped: it is told once the loop runs
        error = other.run_until_complete(asyncio.wait_for(appended[0], _GENEROUS))
    other.close()
    if error is None:
        assert _stored(log_path, "a") == [1]
    else:
        assert isinstance(error, BackendUnavailableError) and "is closed" in str(error)
        assert _stored(log_path, "a") == []


def test_a_group_sealed_by_a_call_as_another_thread_closes_is_told(
    log_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call (a claim) seals the open group, of another loop's append, to
    queue it first; another thread's close() runs whole before the group
    reaches the worker thread. The append must be told (the closed error:
    nothing of it was written), not left waiting on a stopped thread."""
    log = SqliteEventLog(log_path)
    other = asyncio.new_event_loop()
    stranded: list[asyncio.Future[None]] = []

    async def fire_and_forget() -> None:  # the loop stops before it commits the group
        stranded.append(asyncio.ensure_future(log.append([ev("a", 1)])))

    other.run_until_complete(fire_and_forget())
    post = log._worker.post
    fired: list[bool] = []

    def closed_then_post(fn: Callable[[], object]) -> None:
        if not fired:
            fired.append(True)
            closer = _close_in_thread(log)
            closer.join(_GENEROUS)
            assert not closer.is_alive(), "close() hung"
        post(fn)

    monkeypatch.setattr(log._worker, "post", closed_then_post)

    async def claim() -> None:
        with pytest.raises(BackendUnavailableError, match="is closed"):
            await asyncio.wait_for(log.claim_writer("b"), _GENEROUS)

    try:
        asyncio.run(claim())
        assert fired, "the claim did not seal the group"
        with pytest.raises(BackendUnavailableError, match="is closed"):
            other.run_until_complete(asyncio.wait_for(stranded[0], _GENEROUS))
    finally:
        other.close()
    assert not log._db.opened
    assert _stored(log_path, "a") == []


def test_close_unused_while_another_loops_commit_holds_the_connection(log_path: Path) -> None:
    """close_unused() finds no group open, the worker thread never started, and
    another loop's thread is committing a lone append on the connection: it
    must close the connection after that commit, not under it, and with no
    event loop of its own."""
    log = SqliteEventLog(log_path)
    asyncio.run(log.append([ev("r", 1)]))
    assert not log._worker.started
    assert log._worker.hold_if_idle()  # as another loop's thread, committing
    answers: list[bool] = []
    closer = _in_thread(lambda: answers.append(log.close_unused()))
    try:
        deadline = time.monotonic() + _GENEROUS  # until it returned, or waits behind the hold
        while closer.is_alive() and not log._worker.busy and time.monotonic() < deadline:
            closer.join(0.001)
        assert log._db.opened, "the connection was closed under its holder"
    finally:
        log._worker.release()
    closer.join(_GENEROUS)
    assert answers == [True], "close_unused() failed (see the thread's exception)"
    assert not log._db.opened
