"""The queue scenario every backend runs: three workers share a queue of 2.

Each worker runtime opens its own connection (as three processes would) when
given a URL; the memory log, which lives in one process, is shared as is.
Workers are driven pass by pass (``Worker.run_once``), so the test counts
what each pass took, not how fast anything ran.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentlog.eventlog._base import EventLog
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import RunStatus
from agentlog.runtime import Queue, Runtime, RuntimeConfig, StepContext, Workflow, end
from tests.support.runtime import Calls

__all__ = ["RUNS", "queued", "three_workers_share_a_queue", "until"]

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
        waiting = [i for i in await log.list_runs(status=RunStatus.RUNNING) if i.workflow == "mail"]
        assert len(waiting) == RUNS  # recorded at once, none lost
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
