"""Group commit on an owned partition: one transaction carries many runs' appends,
and their events go to the broker together, never one request per append.

aiokafka sends one record batch per partition per request and waits for a
batch's delivery before it queues the next for that partition; a batch per
append would make a transaction of M appends cost M round trips. These tests
count what one transaction sends (wrapping the owner's producer) and check
that every append still lands where its index entry says, fenced and checked
as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentlog.errors import ConfigError, ConflictError, FencedError
from agentlog.eventlog._urls import kafka_config
from agentlog.eventlog.events import Event, StepCompleted
from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog
from agentlog.eventlog.kafka._admin import partition_for
from agentlog.eventlog.kafka._grouplog import PartitionedKafkaEventLog
from agentlog.eventlog.kafka._ownership import PartitionOwner
from tests.eventlog.kafka.group_support import (
    PARTITIONS,
    open_log,
    same_partition_runs,
    settle,
)
from tests.eventlog.kafka.group_support import config as group_config

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

#: Events per append, as a step of the runtime writes a few at a time.
PER_APPEND = 20


def _events(run_id: str, first: int, count: int, epoch: int) -> list[Event]:
    return [
        Event(
            run_id,
            seq,
            StepCompleted("step", seq, 0, {"n": seq, "pad": "x" * 200}),
            writer_epoch=epoch,
        )
        for seq in range(first, first + count)
    ]


class _Counted:
    """Counts what the owner's producer sends and commits (a wrapper, not a mock)."""

    def __init__(self, owner: PartitionOwner, events_topic: str) -> None:
        producer = owner.producer
        assert producer is not None
        self.event_batches = 0
        self.commits = 0
        send_batch, commit = producer.send_batch, producer.commit_transaction

        async def counted_send_batch(batch: Any, topic: str, *, partition: int) -> Any:
            if topic == events_topic:
                self.event_batches += 1
            return await send_batch(batch, topic, partition=partition)

        async def counted_commit() -> None:
            await commit()
            self.commits += 1

        producer.send_batch = counted_send_batch  # type: ignore[method-assign]
        producer.commit_transaction = counted_commit  # type: ignore[method-assign]


async def _member(bootstrap: str, name: str) -> PartitionedKafkaEventLog:
    member = await open_log(bootstrap, name, "workers")
    await settle([member], lambda: len(member.owned_partitions) == PARTITIONS, "member")
    return member


async def test_one_transaction_sends_many_runs_appends_in_one_batch(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    """M concurrent appends of M runs on one partition commit in one transaction
    whose events go out in fewer record batches than appends (one, at this size);
    each run reads back whole from a fresh client, through its index entry."""
    runs = same_partition_runs(12, prefix="batch")
    member = await _member(kafka_bootstrap, kafka_name)
    try:
        epochs = dict(
            zip(runs, await asyncio.gather(*(member.claim_writer(r) for r in runs)), strict=True)
        )
        assert member.member is not None
        owner = member.member.owners[partition_for(runs[0], PARTITIONS)]
        counted = _Counted(owner, member.layout.events)
        # Two appends of the first run ride along: its second batch lands after the others'.
        first, *rest = runs
        appends = [_events(first, 1, PER_APPEND, epochs[first])]
        appends += [_events(r, 1, PER_APPEND, epochs[r]) for r in rest]
        appends.append(_events(first, PER_APPEND + 1, PER_APPEND, epochs[first]))
        await asyncio.gather(*(member.append(events) for events in appends))

        assert counted.commits < len(appends), "group commit: appends share transactions"
        assert counted.event_batches < len(appends), (
            f"{len(appends)} appends went out in {counted.event_batches} record batches over "
            f"{counted.commits} transaction(s): one batch per append costs a round trip each"
        )
    finally:
        await member.close()

    client = await open_log(kafka_bootstrap, kafka_name)
    try:
        for run_id in runs:
            want = 2 * PER_APPEND if run_id == first else PER_APPEND
            info = await client.find_run(run_id)
            assert info is not None and info.last_seq == want
            assert [e.seq async for e in client.read(run_id)] == list(range(1, want + 1))
            assert [e.seq async for e in client.read(run_id, after_seq=want - 1)] == [want]
    finally:
        await client.close()


async def test_a_shared_transaction_still_refuses_stale_and_out_of_order_appends(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    """Appends queued together are checked one by one: a fenced epoch and a taken
    seq are refused with nothing written, and the others land in one batch."""
    runs = same_partition_runs(6, prefix="fence")
    member = await _member(kafka_bootstrap, kafka_name)
    try:
        stale = await member.claim_writer(runs[0])
        epochs = [await member.claim_writer(r) for r in runs]  # runs[0] claimed again: newer
        assert member.member is not None
        owner = member.member.owners[partition_for(runs[0], PARTITIONS)]
        await member.append(_events(runs[1], 1, PER_APPEND, epochs[1]))
        counted = _Counted(owner, member.layout.events)

        fenced = member.append(_events(runs[0], 1, PER_APPEND, stale))
        taken_seq = member.append(_events(runs[1], 1, PER_APPEND, epochs[1]))
        good = [
            member.append(_events(r, 1, PER_APPEND, e))
            for r, e in zip(runs[2:], epochs[2:], strict=True)
        ]
        results = await asyncio.gather(fenced, taken_seq, *good, return_exceptions=True)

        assert isinstance(results[0], FencedError), results[0]
        assert isinstance(results[1], ConflictError), results[1]
        assert results[2:] == [None] * len(good)
        assert counted.event_batches < len(good), counted.event_batches
        assert (await member.find_run(runs[0])).last_seq == 0  # type: ignore[union-attr]
        assert (await member.find_run(runs[1])).last_seq == PER_APPEND  # type: ignore[union-attr]
    finally:
        await member.close()

    client = await open_log(kafka_bootstrap, kafka_name)
    try:
        assert [e.seq async for e in client.read(runs[1])] == list(range(1, PER_APPEND + 1))
        for run_id, epoch in zip(runs[2:], epochs[2:], strict=True):
            read = [e async for e in client.read(run_id)]
            assert [(e.seq, e.writer_epoch) for e in read] == [
                (s, epoch) for s in range(1, PER_APPEND + 1)
            ]
    finally:
        await client.close()


@contextlib.asynccontextmanager
async def _lingering_member(
    bootstrap: str, name: str, runs: list[str]
) -> AsyncIterator[tuple[PartitionedKafkaEventLog, PartitionOwner, list[int]]]:
    """A member owning every partition, its commit linger long (1 s) so that a
    test does not race it, the runs claimed; yields (member, the runs'
    partition owner, their epochs). Each run holds seqs 1 to 3 afterwards."""
    config = dataclasses.replace(group_config(bootstrap, name, "workers"), commit_linger_s=1.0)
    member = await KafkaEventLog.connect(config)
    assert isinstance(member, PartitionedKafkaEventLog)
    try:
        await settle([member], lambda: len(member.owned_partitions) == PARTITIONS, "member")
        epochs = await asyncio.gather(*(member.claim_writer(r) for r in runs))
        assert member.member is not None
        yield member, member.member.owners[partition_for(runs[0], PARTITIONS)], list(epochs)
    finally:
        await member.close()
    client = await open_log(bootstrap, name)
    try:
        for run_id in runs:
            assert [e.seq async for e in client.read(run_id)] == [1, 2, 3]
    finally:
        await client.close()


async def test_writes_that_come_one_after_another_share_a_transaction(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    """The owner lingers before each transaction (``commit_linger_s``), so writes
    of runs that do not arrive together (here each one a loop turn after the
    one before, the first already taken by the commit loop) still share it.
    Committing at once, the first went alone: two transactions, not one."""
    runs = same_partition_runs(8, prefix="linger")
    async with _lingering_member(kafka_bootstrap, kafka_name, runs) as (member, owner, epochs):
        before = owner.commits
        appends = []
        for run_id, epoch in zip(runs, epochs, strict=True):
            appends.append(asyncio.ensure_future(member.append(_events(run_id, 1, 3, epoch))))
            for _ in range(3):  # the commit loop runs between two appends
                await asyncio.sleep(0)
        await asyncio.gather(*appends)
        assert owner.commits - before == 1, f"{owner.commits - before} transactions for {len(runs)}"


async def test_writes_queued_during_a_commit_go_next_without_the_linger(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    """The linger is for an idle partition's first write: writes that queued while
    a transaction was in flight already waited that long, so the next transaction
    takes them at once (issue 23 item 10: under load the linger was pure latency,
    about 10 ms of each transaction's 40 to 80). Counted: two transactions, one
    linger (the first write's); before, each transaction lingered."""
    runs = same_partition_runs(6, prefix="busy")
    async with _lingering_member(kafka_bootstrap, kafka_name, runs) as (member, owner, epochs):
        commits, lingers = owner.commits, owner.lingers
        first = asyncio.ensure_future(member.append(_events(runs[0], 1, 3, epochs[0])))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        # Wait until the first write's transaction is in flight (taken, not yet done).
        while not any(c.run_id == runs[0] and not c.done.done() for c in owner._inflight):
            assert loop.time() < deadline and not first.done(), "never saw it in flight"
            await asyncio.sleep(0.001)
        rest = [
            asyncio.ensure_future(member.append(_events(r, 1, 3, e)))
            for r, e in zip(runs[1:], epochs[1:], strict=True)
        ]
        await asyncio.gather(first, *rest)
        assert owner.commits - commits == 2, f"{owner.commits - commits} transactions"
        assert owner.lingers - lingers == 1, f"{owner.lingers - lingers} lingered"


def test_the_commit_linger_is_set_by_url_and_checked() -> None:
    config = kafka_config("kafka://127.0.0.1:9092/x?group=g&commit_linger=0.05")
    assert config.commit_linger_s == 0.05
    assert KafkaConfig(bootstrap_servers="h:1", name="x").commit_linger_s == 0.01
    for bad in (-0.001, 2.0):
        with pytest.raises(ConfigError, match="commit_linger_s must be between 0 and 1"):
            KafkaConfig(bootstrap_servers="h:1", name="x", commit_linger_s=bad)
