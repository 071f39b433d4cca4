"""Messages to a run driven by ``agentlog worker`` processes, on SQLite and on
a Kafka worker fleet: the test process sends (``Runtime.send``, each with an
idempotency key), the run receives one message per superstep, and the worker
that drives it is SIGKILLed midway. Every message is in the run's history
once and in order, and received once, in order. Bounded by count: 8 messages.

Published values (``ctx.publish`` / ``rt.get_event``) across a SIGKILL: the
worker dies inside the task between two publishes, while a client waits
for the last value; the step runs again in another worker, each publish call
is recorded once, and the client gets the value.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentlog.eventlog.events import MessageReceived, MessageSent, RunStatus, ValuePublished
from agentlog.runtime import Runtime
from tests.support.fleet import Dedup, Fleet, history, until

pytestmark = [pytest.mark.fleet, pytest.mark.usefixtures("backend")]  # on SQLite and Kafka

COUNT = 8
KAFKA_PARTITIONS = 2


@pytest.mark.timeout(300)
async def test_messages_reach_a_run_whose_worker_is_killed_once_each_in_order(
    fleet: Fleet, client: Runtime
) -> None:
    first = fleet.start()
    await client.submit("inbox", run_id="inbox", input={"want": COUNT})

    async def received(count: int) -> bool:
        events = [e async for e in client.log.read("inbox")]
        return sum(isinstance(e.data, MessageReceived) for e in events) >= count

    for n in range(COUNT):
        await client.send("inbox", "jobs", n, idempotency_key=f"job-{n}")
        if n == COUNT // 2:
            await until(lambda n=n: received(n + 1), f"message {n} is received", 120)
            first.kill()  # the run's driver dies; another worker takes the run on
            fleet.start()

    async def completed() -> bool:
        info = await client.log.find_run("inbox")
        return info is not None and info.status == RunStatus.COMPLETED

    await until(completed, "the run received every message", 120)
    events = await history(client.log, "inbox")
    sent = [(e.seq, e.data.value) for e in events if isinstance(e.data, MessageSent)]
    assert [value for _, value in sent] == list(range(COUNT))
    deliveries = [e.data.seq for e in events if isinstance(e.data, MessageReceived)]
    assert deliveries == [seq for seq, _ in sent]
    assert (await client.get_state("inbox")).values["got"] == list(range(COUNT))


@pytest.mark.timeout(300)
async def test_a_client_gets_a_value_published_after_its_worker_was_killed_mid_task(
    fleet: Fleet, client: Runtime, dedup: Dedup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = tmp_path / "bulletin-gate"
    monkeypatch.setenv("BULLETIN_GATE", str(gate))  # the workers inherit it
    first = fleet.start()
    await client.submit("bulletin", run_id="pub")
    waiter = asyncio.create_task(client.get_event("pub", "result", timeout=240))

    async def in_task() -> bool:  # "started" is published and the effect delivered
        return bool(dedup.rows("SELECT key FROM deliveries WHERE kind = 'bulletin'"))

    await until(in_task, "the task runs", 120)
    assert await client.get_event("pub", "stage", timeout=0) == "started"
    first.kill()  # inside the task, between the step's publishes
    gate.touch()
    fleet.start()
    result = await waiter
    events = await history(client.log, "pub")
    published = [(e.data.key, e.data.value) for e in events if isinstance(e.data, ValuePublished)]
    assert published == [("stage", "started"), ("stage", "worked"), ("result", result)]
    calls = [(e.data.superstep, e.data.branch, e.data.index) for e in events
             if isinstance(e.data, ValuePublished)]  # fmt: skip
    assert len(calls) == len(set(calls))  # each publish call once
    state = await client.get_state("pub")
    assert state.published == {"stage": "worked", "result": result}
    keys = {row[0] for row in dedup.rows("SELECT key FROM deliveries WHERE kind = 'bulletin'")}
    assert len(keys) == 1  # the effect ran again after the kill with the same key
