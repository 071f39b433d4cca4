"""A writer SIGKILLed with a transaction open holds back no reader and no new owner.

The dead writer's transaction has a ten-minute timeout, so the broker would
hold every reader of its partitions (events and the run index) for ten
minutes on its own. A new process must still open the log, find the run,
read another run of the same partition, take the run over and append to
it, all with the dead transaction's records never seen. The hang guard is
far below the transaction timeout: waiting the transaction out fails.
"""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from agentlog.errors import BackendUnavailableError
from agentlog.eventlog.events import Event, TaskCompleted
from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog
from tests.eventlog.kafka.dead_writer import events

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[3]
COUNT = 3
#: Hang guard: generous for a loaded machine, a fraction of the 600 s transaction timeout.
GUARD_S = 120


async def _take_over(config: KafkaConfig) -> None:
    async with await KafkaEventLog.connect(config) as log:
        other = [e.seq async for e in log.read("other")]
        assert other == list(range(1, COUNT + 1))
        info = await log.find_run("doomed")
        assert info is not None and info.last_seq == COUNT  # the open append is not there
        epoch = await log.claim_writer("doomed", owner="heir", lease_seconds=30, force=False)
        assert epoch == info.writer_epoch + 1
        data = TaskCompleted("heir", "taken over")
        await log.append([Event("doomed", COUNT + 1, data, writer_epoch=epoch)])
        got = [e async for e in log.read("doomed")]
        assert [e.seq for e in got] == list(range(1, COUNT + 2))
        assert got[-1].data == data and got[-1].writer_epoch == epoch
        assert [e.data for e in got[:COUNT]] == [e.data for e in events("doomed", 1, COUNT, 0)]
        assert (await log.get_run("doomed")).writer_epoch == epoch


@pytest.mark.timeout(GUARD_S + 60)
async def test_sigkilled_writer_with_an_open_transaction_is_taken_over_at_once(
    kafka_bootstrap: str, kafka_name: str, tmp_path: Path
) -> None:
    # partitions=1: both runs, and their open transaction, share one events partition.
    config = KafkaConfig(bootstrap_servers=kafka_bootstrap, name=kafka_name, partitions=1)
    async with await KafkaEventLog.connect(config):
        pass  # the topics exist before the child writes
    child_log = tmp_path / "dead_writer.log"
    with child_log.open("w") as stderr:
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.eventlog.kafka.dead_writer",
            kafka_bootstrap,
            kafka_name,
            "doomed",
            "other",
            str(COUNT),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(child.stdout.readline(), GUARD_S)
        assert line.strip() == b"OPEN", child_log.read_text()[-3000:]
    finally:
        child.kill()  # SIGKILL, with its transaction open
        await child.wait()
    await asyncio.wait_for(_take_over(config), GUARD_S)


async def test_a_held_run_index_is_named_not_called_unreachable(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    """An open transaction agentlog cannot abort (not one of its writers') holds the
    run index: the error says so, not that the broker cannot be reached."""
    config = KafkaConfig(bootstrap_servers=kafka_bootstrap, name=kafka_name, partitions=1)
    async with await KafkaEventLog.connect(config):
        pass
    intruder = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap,
        transactional_id=f"{kafka_name}.someone-else",
        transaction_timeout_ms=600_000,
    )
    await intruder.start()
    try:
        await intruder.begin_transaction()
        await (await intruder.send(f"{kafka_name}.runs", b"?", key=b"not-ours", partition=0))
        short_connect = dataclasses.replace(config, connect_timeout_s=3, request_timeout_s=60)
        with pytest.raises(BackendUnavailableError) as caught:
            await KafkaEventLog.connect(short_connect)
        message = str(caught.value)
        assert f"connected to Kafka at {kafka_bootstrap}" in message
        assert f"reading the run index (topic {kafka_name}.runs)" in message
        assert "cannot reach" not in message
        short_read = dataclasses.replace(config, connect_timeout_s=60, request_timeout_s=3)
        with pytest.raises(BackendUnavailableError) as caught:
            await KafkaEventLog.connect(short_read)
        message = str(caught.value)
        assert f"topic {kafka_name}.runs partition 0" in message
        assert "an open transaction at offset" in message
        assert caught.value.retryable
    finally:
        await intruder.abort_transaction()
        await intruder.stop()
