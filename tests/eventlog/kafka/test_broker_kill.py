"""SIGKILL the broker JVM mid-run, restart it on the same log dir and port.

The run keeps appending through the outage (appends wait and retry), then
finishes; every append that returned is on the log, and nothing is there
twice. This test runs its own broker, so killing it disturbs no other test.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentlog.eventlog.events import Event, TaskCompleted
from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog
from tests.services.kafka_broker import broker

pytestmark = [pytest.mark.kafka, pytest.mark.crash]

STEPS = 120
KILL_AFTER = 40


@pytest.mark.timeout(240)
async def test_run_survives_broker_sigkill_without_loss_or_duplicates(tmp_path: Path) -> None:
    state = tmp_path / "broker"
    bootstrap = await asyncio.to_thread(broker, "start", state)
    try:
        config = KafkaConfig(
            bootstrap_servers=bootstrap,
            name="crash",
            partitions=1,
            request_timeout_s=90,
            connect_timeout_s=30,
        )
        log = await KafkaEventLog.connect(config)
        acked: list[int] = []
        halfway, killed = asyncio.Event(), asyncio.Event()

        async def run() -> None:
            epoch = await log.claim_writer("survivor", owner="test")
            for seq in range(1, STEPS + 1):
                if seq == KILL_AFTER + 1:
                    # Wait for the kill, so the rest of the run meets the outage
                    # however fast this machine is.
                    halfway.set()
                    await killed.wait()
                data = TaskCompleted(key=f"step-{seq}", result=seq)
                await log.append([Event("survivor", seq, data, writer_epoch=epoch)])
                acked.append(seq)

        task = asyncio.create_task(run())
        await asyncio.wait_for(halfway.wait(), timeout=120)  # hang guard
        assert not task.done(), task
        await asyncio.to_thread(broker, "kill", state)
        killed.set()  # the next appends find no broker and must wait it out
        await asyncio.sleep(1.0)
        await asyncio.to_thread(broker, "start", state)
        await asyncio.wait_for(task, timeout=150)
        assert acked == list(range(1, STEPS + 1))
        seqs = [e.seq async for e in log.read("survivor")]
        assert seqs == list(range(1, STEPS + 1))
        await log.close()
        # A process started after the restart sees the same history.
        async with await KafkaEventLog.connect(config) as fresh:
            events = [e async for e in fresh.read("survivor")]
            assert [e.seq for e in events] == list(range(1, STEPS + 1))
            assert [e.data.result for e in events] == list(range(1, STEPS + 1))  # type: ignore[attr-defined]
            assert (await fresh.get_run("survivor")).last_seq == STEPS
    finally:
        await asyncio.to_thread(broker, "stop", state)
