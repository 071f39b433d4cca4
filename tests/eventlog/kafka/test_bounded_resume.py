"""Resume reads from the snapshot's offset, not the whole partition.

One run of N events is interleaved, batch by batch, with OTHERS other runs
that write as much each, all on ONE partition (the worst case for a shared
partition). With a snapshot every SNAP_EVERY events of the run, a resume
must fetch about ``SNAP_EVERY x (OTHERS + 1)`` records, whatever the size of
the partition. The issue asks for a 100k-event run among 1M events; here the
sizes are 10x smaller to keep the suite fast on two cores, with the same
ratio. benchmarks/bench_kafka.py runs the 1M-event size. Batches are
committed one by one (durable) so the partition holds exactly that
round-robin interleaving.
"""

from __future__ import annotations

import pytest

from agentlog.eventlog._base import Snapshot
from agentlog.eventlog.events import Event, TaskCompleted, utcnow
from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog

pytestmark = pytest.mark.kafka

N = 10_000  # events of the run that resumes
OTHERS = 9  # other runs interleaved with it: 100k events in the partition
BATCH = 100
SNAP_EVERY = 1_000


def _batch(run_id: str, first: int) -> list[Event]:
    return [Event(run_id, seq, TaskCompleted("k", seq)) for seq in range(first, first + BATCH)]


@pytest.mark.timeout(180)
async def test_resume_reads_snapshot_interval_times_interleaving(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    config = KafkaConfig(bootstrap_servers=kafka_bootstrap, name=kafka_name, partitions=1)
    async with await KafkaEventLog.connect(config) as log:
        for first in range(1, N + 1, BATCH):
            for other in range(OTHERS):
                await log.append(_batch(f"other-{other}", first))
            await log.append(_batch("target", first))
            last = first + BATCH - 1
            if last % SNAP_EVERY == 0 and last < N:
                await log.save_snapshot(Snapshot("target", last, b"state", utcnow()))
        for other in range(OTHERS):
            assert (await log.get_run(f"other-{other}")).last_seq == N
        assert (await log.get_run("target")).last_seq == N

    total = N * (OTHERS + 1)
    # A new process: it knows nothing but what the topics say.
    async with await KafkaEventLog.connect(config) as fresh:
        snapshot = await fresh.load_snapshot("target")
        assert snapshot is not None and snapshot.seq == N - SNAP_EVERY
        tail = [e async for e in fresh.read("target", after_seq=snapshot.seq)]
        assert [e.seq for e in tail] == list(range(snapshot.seq + 1, N + 1))
        bounded = fresh.last_read_records
        # About the snapshot interval times the interleaving (plus one batch of
        # slack for where the snapshot's offset falls), not the partition.
        assert SNAP_EVERY * (OTHERS + 1) <= bounded <= (SNAP_EVERY + BATCH) * (OTHERS + 1)
        assert bounded * 5 < total

        full = [e async for e in fresh.read("target")]
        assert [e.seq for e in full] == list(range(1, N + 1))
        assert fresh.last_read_records >= total - (OTHERS * BATCH)
