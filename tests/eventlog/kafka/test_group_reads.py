"""An owner reads back the runs it just wrote without a round trip to the broker.

A worker that starts a run reads it back at once to drive it (its snapshot,
then its events). From the broker that read was serialized through the
process's one events consumer, a few round trips each, which capped a worker
near 14 starts a second. These tests count the broker reads (wrapping the
reader's two fetch paths) and check that what comes back is still decoded
and checked: the run's own committed bytes, checksum verified.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentlog.errors import CorruptEventError
from agentlog.eventlog.events import Event, StepCompleted
from agentlog.eventlog.kafka._admin import partition_for
from agentlog.eventlog.kafka._changes import RECENT_PER_RUN
from agentlog.eventlog.kafka._grouplog import PartitionedKafkaEventLog
from tests.eventlog.kafka.group_support import PARTITIONS, open_log, settle, started

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]


class _BrokerReads:
    """Counts the reader's reads of the events topic and of the runs topic."""

    def __init__(self, log: PartitionedKafkaEventLog) -> None:
        self.events = self.runs = 0
        reader = log._reader
        records, catch_up = reader._records, reader.catch_up

        async def counted_records(partition: int, start: int, end: int | None = None) -> list[Any]:
            self.events += 1
            return await records(partition, start, end)

        async def counted_catch_up(partitions: Any = None) -> None:
            self.runs += 1
            await catch_up(partitions)

        reader._records = counted_records  # type: ignore[method-assign]
        reader.catch_up = counted_catch_up  # type: ignore[method-assign]


def _step(run_id: str, seq: int, epoch: int) -> Event:
    return Event(run_id, seq, StepCompleted("s", seq, 0, {"n": seq}), writer_epoch=epoch)


async def test_an_owner_reads_a_run_it_just_started_without_a_broker_read(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    member = await open_log(kafka_bootstrap, kafka_name, "workers")
    try:
        await settle([member], lambda: len(member.owned_partitions) == PARTITIONS, "member")
        epoch = await member.claim_writer("fresh", owner="w")
        written = [Event("fresh", 1, started(), writer_epoch=epoch), _step("fresh", 2, epoch)]
        await member.append(written)
        reads = _BrokerReads(member)

        assert await member.load_snapshot("fresh") is None
        back = [e async for e in member.read("fresh")]
        assert [(e.seq, e.data) for e in back] == [(e.seq, e.data) for e in written]
        assert [e.seq async for e in member.read("fresh", after_seq=1)] == [2]
        assert (reads.events, reads.runs) == (0, 0), "read back from the broker"

        # Past what the owner keeps, a read goes to the broker, whole and checked.
        more = [_step("fresh", s, epoch) for s in range(3, RECENT_PER_RUN + 5)]
        await member.append(more)
        assert [e.seq async for e in member.read("fresh")] == list(range(1, RECENT_PER_RUN + 5))
        assert reads.events == 1
        assert [e.seq async for e in member.read("fresh", after_seq=RECENT_PER_RUN + 2)] == [
            RECENT_PER_RUN + 3,
            RECENT_PER_RUN + 4,
        ]
        assert reads.events == 1
    finally:
        await member.close()


async def test_an_owners_kept_bytes_are_checksum_verified_on_read(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    member = await open_log(kafka_bootstrap, kafka_name, "workers")
    try:
        await settle([member], lambda: len(member.owned_partitions) == PARTITIONS, "member")
        epoch = await member.claim_writer("flip", owner="w")
        await member.append([Event("flip", 1, started(), writer_epoch=epoch)])
        assert member.member is not None
        owner = member.member.owners[partition_for("flip", PARTITIONS)]
        seq, value = owner.recent._runs["flip"][-1]
        flipped = bytearray(value)
        flipped[len(flipped) // 2] ^= 0xFF
        owner.recent._runs["flip"][-1] = (seq, bytes(flipped))
        with pytest.raises(CorruptEventError):
            [e async for e in member.read("flip")]
    finally:
        await member.close()


async def test_concurrent_reads_of_one_partition_share_a_catch_up(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    """A client's many concurrent ``find_run`` calls (64 submits at once each
    look the run up first) share reads of the runs topic: each read asks for a
    high watermark, and one after the other they capped a client's submits."""
    client = await open_log(kafka_bootstrap, kafka_name)
    try:
        where = client.layout.runs_partition
        runs = [r for r in (f"coalesce-{n}" for n in range(400)) if where(r) == where("coalesce-0")]
        runs = runs[:20]
        reader = client._reader
        asked = 0
        high_watermark = reader.high_watermark

        async def counted(tp: Any) -> int:
            nonlocal asked
            asked += 1
            return await high_watermark(tp)

        reader.high_watermark = counted  # type: ignore[method-assign]
        assert await asyncio.gather(*(client.find_run(r) for r in runs)) == [None] * len(runs)
        assert asked <= 2, f"{len(runs)} concurrent lookups read the runs topic {asked} times"
        before = asked
        await client.find_run(runs[0])  # a later call reads again: it may see newer records
        assert asked == before + 1
    finally:
        await client.close()
