"""``SqliteEventLog.append_here``: an append committed on the calling thread,
with no event loop, when the log is idle (a LangGraph saver's sync ``put``).

Pinned by what is stored and by counting: a busy log declines without calling
the batch's maker; a refused batch writes nothing; a tail on another thread's
loop is woken by the append (its poll is an hour, the wait is bounded).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from agentlog.errors import ConflictError, FencedError
from agentlog.eventlog.events import Event
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.eventlog.sqlite.test_group_commit import ev, seqs, worker_held

_BOUND = 60.0


def test_an_idle_log_commits_the_batch_on_the_calling_thread(log_path: Path) -> None:
    log = SqliteEventLog(log_path)
    try:
        assert log.append_here(lambda: [ev("r", 1), ev("r", 2)])
        assert log.append_here(lambda: [ev("r", 3)])
        assert log._group.here_commits == 2
        assert not log._worker.started  # no thread started, no event loop made
        assert asyncio.run(seqs(log, "r")) == [1, 2, 3]
    finally:
        asyncio.run(log.close())


async def test_a_busy_log_declines_without_making_the_batch(log_path: Path) -> None:
    async with SqliteEventLog(log_path) as log:
        made: list[int] = []

        def make() -> list[Event]:
            made.append(1)
            return [ev("r", 1)]

        with worker_held(log):
            assert not await asyncio.to_thread(log.append_here, make)
        pending = asyncio.ensure_future(log.append([ev("r", 1)]))
        await asyncio.sleep(0)  # its group is open, not committed yet
        assert not await asyncio.to_thread(log.append_here, make)
        await pending
        assert made == []
        assert await seqs(log, "r") == [1]


async def test_a_refused_batch_writes_nothing(log_path: Path) -> None:
    async with SqliteEventLog(log_path) as log:
        await log.append([ev("r", 1)])
        with pytest.raises(ConflictError):
            await asyncio.to_thread(log.append_here, lambda: [ev("r", 1)])
        await log.claim_writer("r")
        with pytest.raises(FencedError):
            await asyncio.to_thread(log.append_here, lambda: [ev("r", 2, epoch=0)])
        assert await seqs(log, "r") == [1]


def test_a_tail_on_another_threads_loop_is_woken(log_path: Path) -> None:
    log = SqliteEventLog(log_path)
    assert log.append_here(lambda: [ev("r", 1)])
    seen: list[int] = []
    armed = threading.Event()

    async def follow() -> None:
        tail = log.tail("r", after_seq=1, poll_seconds=3600.0)
        armed.set()
        async for event in tail:
            seen.append(event.seq)
            return

    follower = threading.Thread(target=asyncio.run, args=(follow(),), daemon=True)
    follower.start()
    try:
        assert armed.wait(_BOUND)
        for _ in range(int(_BOUND * 100)):  # until the tail armed its wake
            if log._changes._loops:
                break
            armed.wait(0.01)
        assert log.append_here(lambda: [ev("r", 2)])
        follower.join(_BOUND)
        assert seen == [2]
    finally:
        asyncio.run(log.close())
