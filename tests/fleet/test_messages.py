"""Messages to a run driven by ``agentlog worker`` processes, on SQLite and on
a Kafka worker fleet: the test process sends (``Runtime.send``, each with an
idempotency key), the run receives one message per superstep, and the worker
that drives it is SIGKILLed midway. Every message is in the run's history
once and in order, and received once, in order. Bounded by count: 8 messages.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentlog.eventlog.events import MessageReceived, MessageSent, RunStatus
from agentlog.runtime import Runtime
from tests.support.fleet import Fleet, history, until

pytestmark = pytest.mark.fleet

COUNT = 8
KAFKA_PARTITIONS = 2


@pytest.fixture(params=["sqlite", pytest.param("kafka", marks=pytest.mark.kafka)])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def log_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The client's log: SQLite, or the fleet's Kafka topics (read, send commands)."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'fleet.db'}"
    bootstrap = request.getfixturevalue("kafka_bootstrap")
    name = request.getfixturevalue("kafka_name")
    return f"kafka://{bootstrap}/{name}?layout=partitioned&partitions={KAFKA_PARTITIONS}"


@pytest.fixture
def worker_url(backend: str, log_url: str) -> str:
    if backend == "sqlite":
        return log_url
    base = log_url.split("?", 1)[0]
    return f"{base}?group=fleet&partitions={KAFKA_PARTITIONS}&session_timeout=6"


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
