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


@pytest.mark.parametrize("tails", [1, 2])
def test_tails_on_other_threads_loops_are_woken(log_path: Path, tails: int) -> None:
    """One tail, or two on two loops sharing the log (an asyncio.Event belongs
    to one loop: a shared one failed the second tail with RuntimeError)."""
    log = SqliteEventLog(log_path)
    assert log.append_here(lambda: [ev("r", 1)])
    seen: dict[int, object] = {}

    async def follow(n: int) -> None:
        try:
            async for event in log.tail("r", after_seq=1, poll_seconds=3600.0):
                seen[n] = event.seq
                return
        except Exception as exc:
            seen[n] = exc

    followers = [
        threading.Thread(target=asyncio.run, args=(follow(n),), daemon=True) for n in range(tails)
    ]
    for follower in followers:
        follower.start()
    try:
        waited = threading.Event()
        for _ in range(int(_BOUND * 100)):  # until every tail armed its wake
            if len(log._changes._events) == tails:
                break
            waited.wait(0.01)
        assert len(log._changes._events) == tails
        assert log.append_here(lambda: [ev("r", 2)])
        for follower in followers:
            follower.join(_BOUND)
        assert seen == dict.fromkeys(range(tails), 2)
    finally:
        asyncio.run(log.close())
