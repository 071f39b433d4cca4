"""Delta snapshots on Kafka: a run's chain survives the runs topic's retention
and a fresh process loads it, reading only the events after the newest one.

The run is the runtime benchmark's loop (a ~500-byte message appended per
step). A new ``KafkaEventLog`` knows only what the topics say: its state
through the chain equals the fold of every event, no link is reported bad,
and the events it fetched are fewer than one snapshot interval.
"""

from __future__ import annotations

import pytest
from benchmarks.bench_runtime import loop_workflow
from structlog.testing import capture_logs

from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog
from agentlog.projector import fold, load_state
from agentlog.projector._snapshots import SnapshotPolicy
from agentlog.runtime import Runtime, RuntimeConfig

pytestmark = pytest.mark.kafka

RUN = "bench"
EVERY = 20


@pytest.mark.timeout(180)
async def test_a_fresh_process_loads_the_chain_and_reads_less_than_an_interval(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    config = KafkaConfig(bootstrap_servers=kafka_bootstrap, name=kafka_name, partitions=1)
    policy = SnapshotPolicy(every=EVERY, on_park=False, base_every=4)
    wf = loop_workflow(150)
    async with await KafkaEventLog.connect(config) as log:
        cfg = RuntimeConfig(snapshots=policy, worker=False)
        async with Runtime(log, workflows=[wf], config=cfg) as runtime:
            await runtime.start(wf, run_id=RUN, durability="sync")
            assert (await runtime.wait(RUN)).status == "completed"
        events = [event async for event in log.read(RUN)]

    async with await KafkaEventLog.connect(config) as fresh:
        newest = await fresh.load_snapshot(RUN)
        assert newest is not None and newest.base_seq > 0  # a delta, whose base was kept
        assert await fresh.load_snapshot(RUN, at_or_before=newest.base_seq) is not None
        with capture_logs() as logs:
            state = await load_state(fresh, RUN)
        assert state.to_dict() == fold(events).to_dict()
        assert logs == []
        assert fresh.last_read_records < EVERY  # one partition, one run: records are events
        for seq in (newest.base_seq, newest.base_seq + 7, len(events) - 1):
            assert (await load_state(fresh, RUN, at_seq=seq)).to_dict() == fold(
                events[:seq]
            ).to_dict()
