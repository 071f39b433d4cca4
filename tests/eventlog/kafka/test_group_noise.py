"""A worker whose partition is taken from it stops cleanly, and says so truly.

A newer owner of a partition opens the partition's transactional id, which
fences this process's producer (what a zombie worker meets after the group
moved its partitions). The run it drove then stops with a NotOwnerError that
names the run and the partition, and nothing the worker started is left for
asyncio to report at garbage collection ("Task exception was never
retrieved", "Future exception was never retrieved").
"""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import pytest

from agentlog.errors import NotOwnerError
from agentlog.eventlog.events import Event, StepCompleted
from agentlog.eventlog.kafka._admin import partition_for
from agentlog.eventlog.kafka._clients import start_client, stop_quietly, transactional_producer
from agentlog.eventlog.kafka._grouplog import PartitionedKafkaEventLog
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end
from tests.eventlog.kafka.group_support import PARTITIONS, open_log, settle, start_run

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

NEVER_RETRIEVED = "never retrieved"
WAIT_S = 120.0


async def _fence(log: PartitionedKafkaEventLog, partition: int) -> None:
    """Open the partition owner's transactional id elsewhere: a newer owner."""
    producer = transactional_producer(
        bootstrap_servers=log.config.bootstrap_servers,
        transactional_id=log.layout.owner_id(partition),
    )
    await start_client(producer)
    await stop_quietly(producer, 5.0)


def _noise(caplog: pytest.LogCaptureFixture) -> list[str]:
    gc.collect()
    return [r.getMessage() for r in caplog.records if NEVER_RETRIEVED in r.getMessage()]


async def test_a_fenced_owner_names_the_run_and_partition(
    kafka_bootstrap: str, kafka_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="asyncio")
    member = await open_log(kafka_bootstrap, kafka_name, "workers")
    try:
        await settle([member], lambda: len(member.owned_partitions) == PARTITIONS, "member")
        await start_run(member, "r")
        epoch = await member.claim_writer("r", owner="test")
        partition = partition_for("r", PARTITIONS)
        await _fence(member, partition)
        with pytest.raises(NotOwnerError) as caught:
            await member.append([Event("r", 2, StepCompleted("s", 1, 0, {}), writer_epoch=epoch)])
        text = str(caught.value)
        assert caught.value.run_id == "r"
        assert f"run 'r' (partition {partition})" in text
        assert "run ''" not in text and "epoch 0 is fenced by epoch 0" not in text, text
    finally:
        await member.close()
    assert _noise(caplog) == []


def gated(gate: asyncio.Event) -> Workflow:
    wf = Workflow("gated", state={"n": "replace"})

    @wf.step
    async def first(ctx: StepContext) -> Any:
        await gate.wait()
        return end(n=1)

    return wf


async def test_a_worker_that_loses_its_partition_leaves_no_unretrieved_error(
    kafka_bootstrap: str, kafka_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="asyncio")
    gate = asyncio.Event()
    wf = gated(gate)
    url = f"kafka://{kafka_bootstrap}/{kafka_name}?group=workers&partitions=2&session_timeout=6"
    async with await Runtime.open(url, workflows=[wf], config=RuntimeConfig("w")) as rt:
        await rt.submit(wf, run_id="g")
        async with asyncio.timeout(WAIT_S):
            while "g" not in rt.active_runs:  # noqa: ASYNC110 - the worker takes it
                await asyncio.sleep(0.05)
        log = rt.log
        assert isinstance(log, PartitionedKafkaEventLog)
        await _fence(log, log.layout.partition_of("g"))
        gate.set()  # the step ends; its append meets the fence
        async with asyncio.timeout(WAIT_S):
            while "g" in rt.active_runs:  # noqa: ASYNC110 - the run stops here
                await asyncio.sleep(0.05)
    assert _noise(caplog) == []
