"""Messages to a run driven by ``agentlog worker`` processes, on SQLite and on
a Kafka worker fleet: the test process sends (``Runtime.send``, each with an
idempotency key), the run receives one message per superstep, and the worker
that drives it is SIGKILLed midway. Every message is in the run's history
once and in order, and received once, in order. Bounded by count: 8 messages.
"""

from __future__ import annotations

import pytest

from agentlog.eventlog.events import MessageReceived, MessageSent, RunStatus
from agentlog.runtime import Runtime
from tests.support.fleet import Fleet, history, until

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
