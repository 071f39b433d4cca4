"""The last fence and lease check runs where the effect is called (issue 19, item 5).

A writer checked that it still owned the run, then handed the effect to its
thread (or, in ``exit`` mode, first asked the log for the run's epoch). A
pause in between went unseen: in 3 of 60 SIGSTOP trials on SQLite a writer
woke, and the effect it had already cleared ran after the new writer had
recorded its result. Now :meth:`RunWriter.run_effect` checks last, in the
thread or task that calls the effect, with nothing awaited in between.

These tests hold the writer in that window with a hook instead of a signal
(so nothing depends on timing), take the run over from another connection
while it is held, and let the writer learn of it the way its heartbeat does
(a renewal fails with FencedError). The effect must not begin.
``benchmarks/bench_zombie_effects.py`` measures the same with real SIGSTOPs.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from agentlog.errors import FencedError
from agentlog.eventlog._base import RunInfo
from agentlog.eventlog.events import WriterClaimed
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.projector._snapshots import SnapshotPolicy
from agentlog.projector._state import RunState
from agentlog.runtime import StepContext
from agentlog.runtime._writer import RunWriter

#: How long a test waits for a condition before it fails (a hang guard).
WITHIN_S = 20.0


async def _until(check: Callable[[], bool], what: str) -> None:
    try:
        async with asyncio.timeout(WITHIN_S):
            while not check():  # noqa: ASYNC110 - polls a flag another thread sets
                await asyncio.sleep(0.01)
    except TimeoutError:
        pytest.fail(f"timed out after {WITHIN_S:g}s waiting until {what}")


class HeldFindRun(SqliteEventLog):
    """``find_run`` answers, then waits for the test: the pause after
    ``confirm_epoch`` read the run's epoch and before the effect is called."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.armed = False
        self.held, self.release = asyncio.Event(), asyncio.Event()

    async def find_run(self, run_id: str) -> RunInfo | None:
        info = await super().find_run(run_id)
        if self.armed:
            self.held.set()
            await self.release.wait()
        return info


class OneBusyThread(ThreadPoolExecutor):
    """One worker thread, kept busy by the test: an effect handed over waits
    for it, as one does behind other runs' effects on a loaded worker."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.unblock = threading.Event()
        self.handed_over = threading.Event()
        started = threading.Event()
        super().submit(lambda: (started.set(), self.unblock.wait(WITHIN_S)))
        started.wait(WITHIN_S)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future = super().submit(fn, *args, **kwargs)
        self.handed_over.set()
        return future


@pytest.fixture
async def held_log(tmp_path: Path) -> AsyncIterator[HeldFindRun]:
    log = HeldFindRun(tmp_path / "agentlog.db")
    try:
        yield log
    finally:
        await log.close()


async def _writer(log: SqliteEventLog, durability: str) -> RunWriter:
    epoch = await log.claim_writer("r", owner="a", lease_seconds=3600)
    writer = RunWriter(
        log,
        RunState(run_id="r"),
        epoch=epoch,
        durability=durability,
        snapshots=SnapshotPolicy(on_park=False),
        lease_deadline=float("inf"),  # the lease clock never stops it here: the fence does
    )
    writer.emit(WriterClaimed(epoch, "a"))
    await writer.persist()
    return writer


async def _take_over(log: SqliteEventLog, path: Path, writer: RunWriter) -> None:
    """Another process claims the run; this writer's next renewal is refused
    and it is fenced, as its heartbeat would do."""
    async with SqliteEventLog(path) as other:
        await other.claim_writer("r", owner="b", force=True)
    with pytest.raises(FencedError) as refused:
        await log.renew_lease("r", writer.epoch, 3600)
    writer.fence(refused.value)


def _ctx(writer: RunWriter) -> StepContext[Any]:
    return StepContext(writer, step="s", superstep=0, branch=0, attempt=1, state={})


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_a_sync_effect_waiting_for_its_thread_is_not_begun_after_a_takeover(
    held_log: HeldFindRun, tmp_path: Path, durability: str
) -> None:
    pool = OneBusyThread()
    asyncio.get_running_loop().set_default_executor(pool)
    writer = await _writer(held_log, durability)
    effects: list[str] = []
    try:
        task = asyncio.create_task(_ctx(writer).task("email", lambda: effects.append("sent")))
        await _until(pool.handed_over.is_set, "the effect is handed to its thread")
        await _take_over(held_log, tmp_path / "agentlog.db", writer)
        pool.unblock.set()  # the thread is free: the effect's call comes up
        with pytest.raises(FencedError):
            await asyncio.wait_for(task, WITHIN_S)
    finally:
        pool.unblock.set()
        writer.abandon()
    assert effects == [], f"the effect began after the takeover ({durability})"


async def test_an_async_effect_is_not_begun_after_a_takeover_during_confirm_epoch(
    held_log: HeldFindRun, tmp_path: Path
) -> None:
    writer = await _writer(held_log, "exit")
    effects: list[str] = []

    async def email() -> str:
        effects.append("sent")
        return "sent"

    held_log.armed = True  # exit mode asks the log for the epoch before the effect
    task = asyncio.create_task(_ctx(writer).task("email", email))
    try:
        async with asyncio.timeout(WITHIN_S):
            await held_log.held.wait()  # it read the epoch: still its own
        held_log.armed = False
        await _take_over(held_log, tmp_path / "agentlog.db", writer)
        held_log.release.set()
        with pytest.raises(FencedError):
            await asyncio.wait_for(task, WITHIN_S)
    finally:
        held_log.release.set()
        writer.abandon()
    assert effects == [], "the effect began after the takeover"
