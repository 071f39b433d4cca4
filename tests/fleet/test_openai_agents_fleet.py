"""OpenAI Agents SDK runs on a worker fleet (SQLite and Kafka): park, lose a worker, finish.

Two ``agentlog worker`` processes drive a few runs of the support agents
(tests/openai_agents/fleet_app.py) until each parks on its refund approval;
one worker is SIGKILLed; the client approves every run; the other worker
takes the runs over and finishes them. Every run's answer is the expected
one, and no model or tool call ran twice (each key once, in any process).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentlog.eventlog.events import RunStatus
from agentlog.runtime import Runtime, RuntimeConfig
from tests.openai_agents import fleet_app
from tests.support.fleet import Fleet, resume_when_free, until

pytestmark = [pytest.mark.fleet, pytest.mark.usefixtures("backend")]  # on SQLite and Kafka

RUNS = 3
KAFKA_PARTITIONS = 4
QUESTION = {"question": "refund order 42"}
ANSWER = "done: refunded 500 on order 42"
#: the calls of one approved run: 4 model calls, 2 tool calls
CALLS_PER_RUN = 6


@pytest.fixture
async def agents_client(log_url: str) -> AsyncIterator[Runtime]:
    """A client runtime: it records requests and sends commands, never executes."""
    config = RuntimeConfig(owner="client", execute=False, worker=False)
    async with await Runtime.open(log_url, workflows=fleet_app.workflows, config=config) as rt:
        yield rt


async def _all(client: Runtime, status: RunStatus) -> bool:
    states = [await client.get_state(f"oa-{i}") for i in range(RUNS)]
    return all(state.status == status for state in states)


@pytest.mark.timeout(300)
async def test_agents_park_survive_a_killed_worker_and_finish(
    fleet: Fleet,
    agents_client: Runtime,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    journal = tmp_path / "journal"
    monkeypatch.setenv("OA_FLEET_JOURNAL", str(journal))  # the workers inherit it
    app = "tests.openai_agents.fleet_app:workflows"
    doomed, survivor = fleet.start(apps=app, ready=False), fleet.start(apps=app, ready=False)
    doomed.wait_ready()
    survivor.wait_ready()
    for i in range(RUNS):
        await agents_client.submit(fleet_app.support, run_id=f"oa-{i}", input=QUESTION)

    async def parked() -> bool:
        return await _all(agents_client, RunStatus.WAITING)

    await until(parked, "every run parked on its approval", within=120)
    doomed.kill()
    for i in range(RUNS):
        await resume_when_free(agents_client, f"oa-{i}", True)

    async def completed() -> bool:
        return await _all(agents_client, RunStatus.COMPLETED)

    await until(completed, "the surviving worker finished every run", within=120)
    for i in range(RUNS):
        assert (await agents_client.get_state(f"oa-{i}")).values["answer"] == ANSWER
    calls = [json.loads(line) for line in journal.read_text().splitlines()]
    keys = Counter(key for _, _, key in calls)
    assert len(keys) == RUNS * CALLS_PER_RUN
    assert [key for key, n in keys.items() if n > 1] == [], "a recorded call ran again"
    finishers = {pid for pid, kind, _ in calls if kind == "tool:issue_refund"}
    assert finishers == {survivor.pid}, "the refunds ran after the kill, on the survivor"
