"""Queued runs on a Kafka worker fleet: a resumed run asks its queue again.

A worker (a group member in this process, driven pass by pass) and a client
share a queue of one. Run ``a`` parks on a question, which frees its slot;
run ``b`` is admitted and holds the slot; ``a`` is then answered. It is not
started again (one ``RunAdmitted``), but it must wait for room: while ``b``
holds the slot, ``a`` is not driven, and the run index tells them apart
(``b`` running with its writer's live lease, ``a`` running with none:
waiting for room: ``RunInfo.waits_for_room``, which ``agentlog runs``, ``show``
and the UI say). Once ``b`` ends, ``a`` goes on.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentlog.cli._runs import driver
from agentlog.eventlog.events import RunStatus, utcnow
from agentlog.replay._catalog import run_row
from agentlog.runtime import Queue, Runtime, RuntimeConfig, StepContext, Workflow, end
from tests.support.queues import until
from tests.support.runtime import Calls

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

WAIT_S = 120.0


def _queued(calls: Calls, gate: asyncio.Event) -> Workflow:
    wf = Workflow("mail", state={"n": "replace"}, queue=Queue("emails", concurrency=1))

    @wf.step
    async def send(ctx: StepContext) -> Any:
        if ctx.run_id == "a":
            ctx.interrupt("ok?", expects="bool")  # parks the first time: its slot is freed
        calls.hit(ctx.run_id)
        calls.count["inside"] += 1
        calls.count["most"] = max(calls.count["most"], calls.count["inside"])
        try:
            await gate.wait()
        finally:
            calls.count["inside"] -= 1
        return end(n=1)

    return wf


async def test_a_resumed_run_waits_for_room_in_its_queue(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    calls, gate = Calls(), asyncio.Event()
    wf = _queued(calls, gate)
    base = f"kafka://{kafka_bootstrap}/{kafka_name}"
    lease = {"lease_seconds": 30.0, "worker": False}
    worker = await Runtime.open(
        f"{base}?group=workers&partitions=2&session_timeout=6",
        workflows=[wf],
        config=RuntimeConfig(owner="worker", **lease),
    )
    client = await Runtime.open(
        f"{base}?layout=partitioned&partitions=2",
        workflows=[wf],
        config=RuntimeConfig(owner="client", execute=False, **lease),
    )
    log = worker.log

    async def status(run_id: str, wanted: str) -> bool:
        await worker.worker.run_once()
        info = await log.find_run(run_id)
        return info is not None and info.status == wanted

    try:
        await client.submit(wf, run_id="a", input={"n": 0})
        await until(lambda: status("a", RunStatus.WAITING), "run a parks", WAIT_S)
        await client.submit(wf, run_id="b", input={"n": 0})

        async def b_inside() -> bool:
            await worker.worker.run_once()
            return calls.count["b"] == 1

        await until(b_inside, "run b is admitted and inside its step", WAIT_S)
        answer = asyncio.create_task(client.resume("a", True))
        await until(lambda: status("a", RunStatus.RUNNING), "run a's answer is recorded", WAIT_S)
        for _ in range(5):  # passes that would take a if its queue had room
            await worker.worker.run_once()
        await answer
        assert calls.count["a"] == 0, "run a was driven while b held the queue's one slot"
        now = utcnow()
        held, waiting = await log.get_run("b"), await log.get_run("a")
        assert held.status == waiting.status == RunStatus.RUNNING
        assert held.lease_live(now) and not waiting.lease_live(now)
        # Its index row says it waits for room, as a queued run's does (the
        # one rule `agentlog runs`, `show` and the UI read), from the
        # worker's index and from a client's.
        assert driver(waiting, now) == "room in queue 'emails' (admitted before)"
        assert driver(held, now) == "worker worker"
        assert waiting.waits_for_room(now) and not held.waits_for_room(now)
        seen = await client.log.get_run("a")
        assert seen.waits_for_room(utcnow()) and run_row(seen, "hot").waiting_for_room
        gate.set()
        await until(lambda: status("a", RunStatus.COMPLETED), "run a completes", WAIT_S)
        assert (await log.get_run("b")).status == RunStatus.COMPLETED
        assert not (await log.get_run("a")).waits_for_room(utcnow())
        kinds = [e.type async for e in log.read("a")]
        assert kinds.count("RunAdmitted") == 1, kinds  # admitted once, asked twice
    finally:
        gate.set()
        await client.close()
        await worker.close()
    assert calls.count["most"] == 1
