"""The queue scenario every backend runs: three workers share a queue of 2.

Each worker runtime opens its own connection (as three processes would) when
given a URL; the memory log, which lives in one process, is shared as is.
Workers are driven pass by pass (``Worker.run_once``), so the test counts
what each pass took, not how fast anything ran.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest

from agentlog.eventlog._base import EventLog
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import RunStatus
from agentlog.runtime import Queue, Rate, Runtime, RuntimeConfig, StepContext, Workflow, end
from tests.support.runtime import Calls

__all__ = [
    "RUNS",
    "admissions",
    "submit_two_queued",
    "priorities_order_the_queue",
    "queued",
    "rate_limits_starts",
    "three_workers_share_a_queue",
    "until",
]

#: The runs submitted to the queue.
RUNS = 6


def queued(calls: Calls, gate: asyncio.Event, queue: Queue) -> Workflow:
    """One step that waits for ``gate``, counting how many are inside at once."""
    wf = Workflow("mail", state={"n": "replace"}, queue=queue)

    @wf.step
    async def send(ctx: StepContext) -> Any:
        calls.hit("send")
        calls.count["inside"] += 1
        calls.count["most"] = max(calls.count["most"], calls.count["inside"])
        try:
            await gate.wait()
        finally:
            calls.count["inside"] -= 1
        return end(n=1)

    return wf


async def until(predicate: Any, what: str, seconds: float = 30.0) -> None:
    """Poll ``predicate()`` until true; fail with ``what`` after ``seconds``."""
    try:
        async with asyncio.timeout(seconds):
            while not await predicate():  # noqa: ASYNC110 - polls
                await asyncio.sleep(0.01)
    except TimeoutError:
        pytest.fail(f"timed out after {seconds:g}s waiting until {what}")


def _config(owner: str, **kwargs: Any) -> RuntimeConfig:
    return RuntimeConfig(owner=owner, **{"lease_seconds": 30.0, "worker": False, **kwargs})


async def three_workers_share_a_queue(where: EventLog | str) -> None:
    """Three workers, each with room for 50, take at most 2 runs of a queue of 2."""
    calls, gate = Calls(), asyncio.Event()
    wf = queued(calls, gate, Queue("emails", concurrency=2))

    async def connect() -> EventLog:
        return await open_log(where) if isinstance(where, str) else where

    log = await connect()
    client = Runtime(log, workflows=[wf], config=_config("client", execute=False))
    workers = [Runtime(await connect(), workflows=[wf], config=_config(f"w{n}")) for n in range(3)]

    async def inside_is(n: int) -> bool:
        return calls.count["inside"] == n

    try:
        for n in range(RUNS):
            await client.submit(wf, run_id=f"r{n}", input={"n": 0})
        taken = [len(await rt.worker.run_once()) for rt in workers]
        assert sum(taken) == 2, f"taken per worker: {taken}"
        await until(lambda: inside_is(2), "two runs are inside the step")
        taken = [len(await rt.worker.run_once()) for rt in workers]
        assert taken == [0, 0, 0], "a worker took a run while the queue was full"
        driven = [i for i in await log.list_runs(status=RunStatus.RUNNING) if i.workflow == "mail"]
        waiting = [i for i in await log.list_runs(status=RunStatus.QUEUED) if i.workflow == "mail"]
        assert (len(driven), len(waiting)) == (2, RUNS - 2)  # recorded at once, none lost
        gate.set()

        async def all_done() -> bool:
            for rt in workers:
                await rt.worker.run_once()
            done = await log.list_runs(status=RunStatus.COMPLETED)
            return len([i for i in done if i.workflow == "mail"]) == RUNS

        await until(all_done, f"all {RUNS} runs completed")
    finally:
        for rt in [client, *workers]:
            await rt.close()
        if isinstance(where, str):
            for rt in workers:
                await rt.log.close()
            await log.close()
    assert calls.count["send"] == RUNS
    assert calls.count["most"] == 2


async def admissions(log: EventLog, run_ids: list[str]) -> list[tuple[datetime, str]]:
    """``(time, run id)`` of each run's ``RunAdmitted``, read from its events, in order."""
    found = []
    for run_id in run_ids:
        times = [e.ts async for e in log.read(run_id) if e.type == "RunAdmitted"]
        assert len(times) <= 1, f"run {run_id} was admitted {len(times)} times"
        found += [(ts, run_id) for ts in times]
    return sorted(found)


def _instant() -> Workflow:
    wf = Workflow("mail", state={"n": "replace"}, queue=Queue("emails", rate=Rate(2, per=_HOUR)))

    @wf.step
    async def send(ctx: StepContext) -> Any:
        return end(n=1)

    return wf


_HOUR = timedelta(hours=1)


async def rate_limits_starts(where: EventLog | str) -> None:
    """A queue of 2 runs started per hour: two workers start 2 of 5 runs, and
    two new workers (a restart) start none: the count is read from the log."""
    opened: list[EventLog] = []

    async def connect() -> EventLog:
        if not isinstance(where, str):
            return where
        opened.append(await open_log(where))
        return opened[-1]

    async def workers(*names: str) -> list[Runtime]:
        wf = _instant()
        return [Runtime(await connect(), workflows=[wf], config=_config(n)) for n in names]

    log = await connect()
    client = Runtime(log, workflows=[_instant()], config=_config("client", execute=False))
    first = await workers("w1", "w2")
    try:
        for n in range(5):
            await client.submit("mail", run_id=f"r{n}", input={"n": 0})
        for _ in range(3):
            for rt in first:
                await rt.worker.run_once()

        async def two_done() -> bool:
            done = await log.list_runs(status=RunStatus.COMPLETED)
            return len([i for i in done if i.workflow == "mail"]) == 2

        await until(two_done, "two runs completed")
        for rt in first:
            await rt.close()
        second = await workers("w3", "w4")
        for _ in range(3):
            for rt in second:
                assert await rt.worker.run_once() == [], "a new worker started a run over the rate"
        for rt in second:
            await rt.close()
        waiting = await log.list_runs(status=RunStatus.QUEUED)
        assert len([i for i in waiting if i.workflow == "mail"]) == 3
        started = await admissions(log, [f"r{n}" for n in range(5)])
        assert [run_id for _, run_id in started] == ["r0", "r1"]  # equal priority: the oldest
        assert {(await log.get_run(r)).admitted_at for _, r in started} == {ts for ts, _ in started}
    finally:
        for rt in [client, *first]:
            await rt.close()
        for each in opened:
            await each.close()


async def priorities_order_the_queue(where: EventLog | str) -> None:
    """A queue of 1: runs are admitted lowest priority number first, oldest
    first among equals, however they were submitted."""
    wf = Workflow("mail", state={"n": "replace"}, queue=Queue("emails", concurrency=1))

    @wf.step
    async def send(ctx: StepContext) -> Any:
        return end(n=1)

    log = await open_log(where) if isinstance(where, str) else where
    client = Runtime(log, workflows=[wf], config=_config("client", execute=False))
    worker = Runtime(log, workflows=[wf], config=_config("w1"))
    submitted = [("a", 5), ("b", 1), ("c", 3), ("d", 1), ("e", 0), ("f", None)]
    try:
        for run_id, priority in submitted:
            await client.submit(wf, run_id=run_id, input={"n": 0}, priority=priority)
        info = await log.get_run("e")
        assert (info.status, info.queue, info.priority) == (RunStatus.QUEUED, "emails", 0)

        async def all_done() -> bool:
            await worker.worker.run_once()
            done = await log.list_runs(status=RunStatus.COMPLETED)
            return len([i for i in done if i.workflow == "mail"]) == len(submitted)

        await until(all_done, "every run completed")
        started = await admissions(log, [run_id for run_id, _ in submitted])
        assert [run_id for _, run_id in started] == ["e", "f", "b", "d", "c", "a"]
    finally:
        await client.close()
        await worker.close()
        if isinstance(where, str):
            await log.close()


def submit_two_queued(db: Any) -> Workflow:
    """Record runs ``low`` (priority 5) then ``high`` (priority 0) of a queued
    workflow in the SQLite file ``db``, with no worker: both stay queued."""
    wf = Workflow("mail", state={"n": "replace"}, queue=Queue("emails", concurrency=1))

    @wf.step
    async def send(ctx: StepContext) -> Any:
        return end(n=1)

    async def go() -> None:
        config = RuntimeConfig(owner="client", execute=False, worker=False)
        async with await Runtime.open(f"sqlite:///{db}", workflows=[wf], config=config) as rt:
            await rt.submit(wf, run_id="low", input={"n": 0}, priority=5)
            await rt.submit(wf, run_id="high", input={"n": 0}, priority=0)

    asyncio.run(go())
    return wf
