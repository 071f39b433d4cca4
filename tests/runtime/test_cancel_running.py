"""A cancel interrupts a running task (issue 24, item 8), on memory and SQLite.

Each task here sleeps far longer than any test runs, so a cancel that
waited for the task to end (as it did) never returns: the bounded waits
below fail with a message instead. Nothing is timed: a test waits for
conditions.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest

from agentlog.errors import RunCancelledError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import (
    RunCancelled,
    RunStatus,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
)
from agentlog.runtime import Runtime, StepContext, Workflow, end, task
from tests.support.runtime import config, event_log, events_of

__all__ = ["event_log"]

T = TypeVar("T")

#: A hang guard, not a measurement: on the old code the cancel never returns.
_HANG = 60.0
#: Longer than any test runs: only a cancel ends these tasks.
_FOREVER = 3600.0


async def _bounded(work: Awaitable[T], what: str) -> T:
    try:
        async with asyncio.timeout(_HANG):
            return await work
    except TimeoutError:
        pytest.fail(f"still waiting after {_HANG:g}s until {what}")


def _long_running(effect: Any) -> Workflow:
    wf = Workflow("long", state={"done": "replace"})
    crawl = task(name="crawl")(effect)

    @wf.step
    async def only(ctx: StepContext) -> Any:
        return end(done=await crawl())

    return wf


async def _cancel_while_running(event_log: EventLog, wf: Workflow, started: Any) -> None:
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="r", durability="sync")
        await _bounded(started(), "the task started")
        waiter = asyncio.create_task(rt.result("r"))  # a caller awaiting the run
        state = await _bounded(rt.cancel("r", "the user gave up"), "the cancel returned")
        assert state.status == RunStatus.CANCELLED
        assert state.error == "the user gave up"  # the cancel's own reason is recorded
        with pytest.raises(RunCancelledError) as caught:
            await _bounded(waiter, "the caller's await returned")
        assert (caught.value.run_id, caught.value.reason) == ("r", state.error)
        assert (await rt.wait("r")).status == RunStatus.CANCELLED
    events = [e.data for e in await events_of(event_log, "r")]
    assert isinstance(events[-1], RunCancelled)
    # The effect started (its intent is on record: at least once); its outcome
    # is unknown, so none is recorded.
    assert [type(d) for d in events if isinstance(d, TaskStarted)] == [TaskStarted]
    assert not [d for d in events if isinstance(d, TaskCompleted | TaskFailed)]


async def test_cancel_interrupts_a_running_async_task(event_log: EventLog) -> None:
    started = asyncio.Event()

    async def crawl() -> str:
        started.set()
        await asyncio.sleep(_FOREVER)
        return "never"

    await _cancel_while_running(event_log, _long_running(crawl), started.wait)


async def test_cancel_stops_awaiting_a_sync_task_in_its_thread(event_log: EventLog) -> None:
    """A thread cannot be killed: the run is cancelled without waiting for it."""
    started, release = threading.Event(), threading.Event()

    def crawl() -> str:
        started.set()
        release.wait(_FOREVER)
        return "too late"

    async def until_started() -> None:
        while not started.is_set():  # noqa: ASYNC110 - a thread's flag, polled
            await asyncio.sleep(0.01)

    try:
        await _cancel_while_running(event_log, _long_running(crawl), until_started)
    finally:
        release.set()  # let the thread end, so the loop's executor can shut down
