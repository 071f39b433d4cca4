"""How the Kafka backend commits: what an append has done when it returns."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[3]

#: Appends with durable=False, then dies at once: no close, no flush, no finally.
_APPEND_AND_DIE = """
import asyncio, os, sys
from agentlog.eventlog.events import Event, TaskCompleted
from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog

async def main(bootstrap, name):
    log = await KafkaEventLog.connect(KafkaConfig(bootstrap_servers=bootstrap, name=name))
    epoch = await log.claim_writer("r")
    events = [Event("r", s, TaskCompleted(f"k{s}", s), writer_epoch=epoch) for s in (1, 2, 3)]
    await log.append(events, durable=False)
    os._exit(0)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


async def test_a_non_durable_append_is_committed_when_it_returns(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    """durable=False is no second queue on Kafka: the runtime's async mode already
    writes in the background, so an append that returned is on the broker even if
    its process dies the next instant."""
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", textwrap.dedent(_APPEND_AND_DIE), kafka_bootstrap, kafka_name],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    config = KafkaConfig(bootstrap_servers=kafka_bootstrap, name=kafka_name)
    async with await KafkaEventLog.connect(config) as log:
        info = await log.get_run("r")
        assert info.last_seq == 3
        assert [e.seq async for e in log.read("r")] == [1, 2, 3]
