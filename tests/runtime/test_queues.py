"""Queues: at most ``concurrency`` runs of a queue are driven at once, across workers."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from agentlog.errors import ConfigError, WorkflowDefinitionError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunStatus, utcnow
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.runtime import Queue, Rate, Runtime, StepContext, Workflow, end
from tests.support.queues import (
    priorities_order_the_queue,
    queued,
    rate_limits_starts,
    three_workers_share_a_queue,
    until,
)
from tests.support.runtime import Calls, config, event_log

__all__ = ["event_log"]


@pytest.mark.parametrize(
    ("name", "concurrency"),
    [("", 1), ("mail", 0), ("mail", -1), ("mail", True), ("mail", 1.5), (None, 1)],
)
def test_bad_queue_limits_are_refused(name: Any, concurrency: Any) -> None:
    with pytest.raises(ConfigError, match="queue"):
        Queue(name, concurrency=concurrency)


@pytest.mark.parametrize(
    ("runs", "per"),
    [(0, timedelta(seconds=1)), (1.5, timedelta(seconds=1)), (1, timedelta(0)), (1, 60)],
)
def test_bad_rates_are_refused(runs: Any, per: Any) -> None:
    with pytest.raises(ConfigError, match="rate"):
        Rate(runs, per=per)


def test_a_rate_that_is_not_a_rate_is_refused() -> None:
    with pytest.raises(ConfigError, match="rate must be a Rate"):
        Queue("mail", rate=5)  # type: ignore[arg-type]


async def test_bad_priorities_are_refused_before_anything_is_recorded(event_log: EventLog) -> None:
    wf = queued(Calls(), asyncio.Event(), Queue("emails", concurrency=1))
    plain = Workflow("plain", state={"n": "replace"})

    @plain.step
    async def only(ctx: StepContext) -> Any:
        return end(n=1)

    async with Runtime(event_log, workflows=[wf, plain], config=config("w")) as rt:
        for bad in ("high", 1.5, True):
            with pytest.raises(ConfigError, match="priority must be an int"):
                await rt.submit(wf, run_id="a", input={"n": 0}, priority=bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="which has no queue"):
            await rt.submit(plain, run_id="b", priority=1)
        assert await event_log.list_runs() == []


async def test_a_rate_limits_starts_per_period_across_restarts(event_log: EventLog) -> None:
    await rate_limits_starts(event_log)


async def test_priorities_order_the_queue(event_log: EventLog) -> None:
    await priorities_order_the_queue(event_log)


def test_a_queue_that_is_not_a_queue_is_refused() -> None:
    with pytest.raises(WorkflowDefinitionError, match="queue must be a Queue"):
        Workflow("mail", queue="emails")  # type: ignore[call-overload]


async def test_three_workers_drive_at_most_the_queue_limit_at_once(event_log: EventLog) -> None:
    await three_workers_share_a_queue(event_log)


async def test_a_started_run_of_a_full_queue_waits_for_a_worker(event_log: EventLog) -> None:
    calls, gate = Calls(), asyncio.Event()
    wf = queued(calls, gate, Queue("emails", concurrency=1))
    async with Runtime(event_log, workflows=[wf], config=config("w")) as rt:
        await rt.start(wf, run_id="a", input={"n": 0})
        second = await rt.start(wf, run_id="b", input={"n": 0})
        assert calls.count["send"] == 0  # a start of a queued run leaves it to a worker
        assert await rt.worker.run_once() == ["a"]
        await until(lambda: _true(calls.count["inside"] == 1), "run a is inside the step")
        assert await rt.worker.run_once() == []  # the queue is full
        assert (await event_log.get_run("b")).status == RunStatus.QUEUED
        assert await second.status() == RunStatus.QUEUED
        gate.set()
        assert (await rt.wait("a", timeout=30)).values == {"n": 1}
        await until(lambda: _took(rt, "b"), "run b is taken once a is done")
        assert (await rt.wait("b", timeout=30)).values == {"n": 1}
    assert calls.count["most"] == 1


async def _true(value: bool) -> bool:
    return value


async def _took(rt: Runtime, run_id: str) -> bool:
    return run_id in await rt.worker.run_once() or rt.driver.active_run(run_id) is not None


def test_a_queue_on_a_log_whose_workers_own_the_runs_is_refused() -> None:
    wf = queued(Calls(), asyncio.Event(), Queue("emails", concurrency=2))
    with pytest.raises(ConfigError, match="this log has no queue admitter"):
        Runtime(MemoryEventLog(commands=True), workflows=[wf], config=config("w"))


def test_a_queue_on_a_log_whose_index_may_miss_a_claim_is_refused() -> None:
    # Standalone Kafka: any process may claim a run, but its run index is read
    # partition by partition, so a claim made a moment ago elsewhere may be unseen.
    log = MemoryEventLog()
    log.capabilities = dataclasses.replace(log.capabilities, claims_seen=False)
    wf = queued(Calls(), asyncio.Event(), Queue("emails", concurrency=2))
    with pytest.raises(ConfigError, match="need not show another process's claim"):
        Runtime(log, workflows=[wf], config=config("w"))


def test_one_queue_with_two_limits_is_refused() -> None:
    first = queued(Calls(), asyncio.Event(), Queue("emails", concurrency=2))
    second = Workflow("digest", state={"n": "replace"}, queue=Queue("emails", concurrency=3))

    @second.step
    async def only(ctx: StepContext) -> Any:
        return end(n=1)

    with pytest.raises(ConfigError, match="give every workflow of one queue the same Queue"):
        Runtime(MemoryEventLog(), workflows=[first, second], config=config("w"))


async def test_a_claim_that_would_go_over_the_limit_lets_go(event_log: EventLog) -> None:
    """Two workers that each counted room before claiming: the claim counts
    again, and the one over the limit releases the run, which stays queued."""
    calls, gate = Calls(), asyncio.Event()
    wf = queued(calls, gate, Queue("emails", concurrency=1))
    first = Runtime(event_log, workflows=[wf], config=config("w1"))
    second = Runtime(event_log, workflows=[wf], config=config("w2"))
    try:
        await first.submit(wf, run_id="a", input={"n": 0})
        await first.submit(wf, run_id="b", input={"n": 0})
        assert await first.worker.run_once() == ["a"]
        await until(lambda: _true(calls.count["inside"] == 1), "run a is inside the step")
        # As a worker does after a count that saw room: claim and continue.
        await second.driver.take_over(wf, "b")
        assert second.driver.active_run("b") is None, "run b was driven over the queue's limit"
        info = await event_log.get_run("b")
        assert info.status == RunStatus.QUEUED and not info.lease_live(utcnow())
        gate.set()
        await until(lambda: _took(second, "b"), "run b is taken once a is done")
        assert (await second.wait("b", timeout=30)).values == {"n": 1}
    finally:
        await first.close()
        await second.close()
    assert calls.count["most"] == 1


async def test_a_queued_run_driven_by_code_without_the_queue_is_listed_running(
    event_log: EventLog,
) -> None:
    """The workflow lost its queue in a new release: its old queued runs are
    driven without an admission, and the index stops calling them queued."""
    old = queued(Calls(), asyncio.Event(), Queue("emails", concurrency=1))
    async with Runtime(event_log, workflows=[old], config=config("client")) as rt:
        await rt.submit(old, run_id="a", input={"n": 0}, durability="sync")
    assert (await event_log.get_run("a")).status == RunStatus.QUEUED
    new = Workflow("mail", state={"n": "replace"})
    gate = asyncio.Event()

    @new.step
    async def send(ctx: StepContext) -> Any:
        await ctx.task("deliver", _deliver)  # recorded (sync) before the gate
        await gate.wait()
        return end(n=2)

    async def moved_on() -> bool:
        return (await event_log.get_run("a")).last_seq > 3

    async with Runtime(event_log, workflows=[new], config=config("w")) as rt:
        assert await rt.worker.run_once() == ["a"]
        await until(moved_on, "the task is recorded")
        info = await event_log.get_run("a")
        assert (info.status, info.admitted_at) == (RunStatus.RUNNING, None)
        gate.set()
        assert (await rt.wait("a", timeout=30)).values == {"n": 2}


async def _deliver() -> str:
    return "sent"
