"""Pydantic AI agents on a Kafka worker fleet: SIGKILL the worker mid-run, another takes over.

Runs of the support agent (tests/pydantic_ai/fleet_app.py) are submitted by a
client that executes nothing; one ``agentlog worker`` drives them until each
has delivered a model request or tool call, and is then SIGKILLed. A second
worker takes the runs over, they park on the refund approval, the client
answers (a command on Kafka), and they complete. Checked against the log and
the dedup service: no model request or tool call whose result the first
worker recorded ran again on the second, and every output equals Pydantic
AI's own for the same agent.
"""

from __future__ import annotations

import pytest

from agentlog.eventlog.events import RunStatus, TaskCompleted, WriterClaimed
from agentlog.runtime import Runtime, RuntimeConfig
from tests.pydantic_ai import fleet_app
from tests.pydantic_ai.agents import uninterrupted_output
from tests.support.fleet import Dedup, Fleet, history, until

pytestmark = [pytest.mark.fleet, pytest.mark.kafka]

RUNS = 3
APP = "tests.pydantic_ai.fleet_app:workflows"
PARTITIONS = 3


@pytest.fixture
def log_url(request: pytest.FixtureRequest) -> str:
    """The client's log: the fleet's Kafka topics (read, send commands)."""
    bootstrap = request.getfixturevalue("kafka_bootstrap")
    name = request.getfixturevalue("kafka_name")
    return f"kafka://{bootstrap}/{name}?layout=partitioned&partitions={PARTITIONS}"


@pytest.fixture
def worker_url(log_url: str) -> str:
    base = log_url.split("?", 1)[0]
    return f"{base}?group=fleet&partitions={PARTITIONS}&session_timeout=6"


@pytest.mark.timeout(300)
async def test_agent_runs_survive_a_killed_worker(fleet: Fleet, dedup: Dedup, log_url: str) -> None:
    expected = await uninterrupted_output()
    run_ids = [f"pai-{i}" for i in range(RUNS)]
    config = RuntimeConfig(owner="client", execute=False, worker=False)
    async with await Runtime.open(log_url, workflows=fleet_app.workflows, config=config) as client:
        first = fleet.start(apps=APP)
        for run_id in run_ids:
            await fleet_app.durable.submit(client, "refund my kettle", run_id=run_id)

        async def first_worker_is_mid_run() -> bool:
            rows = dedup.rows("SELECT COUNT(*) FROM deliveries WHERE gen = ?", first.pid)
            return rows[0][0] >= 2 * RUNS

        await until(first_worker_is_mid_run, "the first worker delivered calls of every run", 120)
        first.proc.kill()
        first.proc.wait(timeout=30)
        first_owner = first.ready_line.split()[1]
        second = fleet.start(apps=APP)

        async def status_is(status: RunStatus) -> bool:
            infos = [await client.log.get_run(run_id) for run_id in run_ids]
            return all(info.status == status for info in infos)

        await until(lambda: status_is(RunStatus.WAITING), "every run parked on its refund", 120)
        for run_id in run_ids:
            await client.resume(run_id, {"c3": True})
        await until(lambda: status_is(RunStatus.COMPLETED), "every run completed", 120)
        outputs = [await fleet_app.durable.output(client, run_id) for run_id in run_ids]
        recorded_by_first: set[str] = set()
        for run_id in run_ids:
            events = await history(client.log, run_id)
            owners = {
                e.writer_epoch: e.data.owner for e in events if isinstance(e.data, WriterClaimed)
            }
            recorded_by_first |= {
                e.data.key
                for e in events
                if isinstance(e.data, TaskCompleted) and owners.get(e.writer_epoch) == first_owner
            }
    assert outputs == [expected] * RUNS
    assert recorded_by_first, "the first worker recorded no call before it was killed"
    again = dedup.rows("SELECT kind, key FROM deliveries WHERE gen = ?", second.pid)
    repeated = [(kind, key) for kind, key in again if key in recorded_by_first]
    assert repeated == [], f"recorded calls ran again on the second worker: {repeated}"
