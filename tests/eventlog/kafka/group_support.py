"""Helpers of the consumer-group tests: open members and clients, make runs, wait."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaTimeoutError

from agentlog.eventlog._base import Command
from agentlog.eventlog.events import Event, RunStarted
from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog
from agentlog.eventlog.kafka._admin import partition_for
from agentlog.eventlog.kafka._grouplog import PartitionedKafkaEventLog
from agentlog.eventlog.kafka._ownership import PartitionOwner
from agentlog.runtime import StepContext, Workflow, end

PARTITIONS = 4
#: The broker's smallest session timeout (group.min.session.timeout.ms).
SESSION_S = 6.0
#: Bound of every wait for the group to settle (rebalances take a session or two).
SETTLE_S = 90.0


def asks() -> Workflow:
    """A one-step workflow that parks on a yes/no question."""
    wf = Workflow("asks", state={"answer": "replace"})

    @wf.step
    async def ask(ctx: StepContext) -> Any:
        return end(answer=ctx.interrupt("ok?", expects="bool"))

    return wf


def started() -> RunStarted:
    """A RunStarted of the test workflow."""
    return RunStarted("wf", "1", {}, "sync", "fp")


def config(bootstrap: str, name: str, group: str = "") -> KafkaConfig:
    return KafkaConfig(
        bootstrap_servers=bootstrap,
        name=name,
        partitions=PARTITIONS,
        layout="partitioned",
        group_id=group,
        session_timeout_s=SESSION_S,
        connect_timeout_s=30.0,
    )


async def open_log(bootstrap: str, name: str, group: str = "") -> PartitionedKafkaEventLog:
    log = await KafkaEventLog.connect(config(bootstrap, name, group))
    assert isinstance(log, PartitionedKafkaEventLog)
    return log


async def settle(
    logs: list[PartitionedKafkaEventLog],
    done: Callable[[], bool],
    what: str,
) -> None:
    """Wait until ``done()``, waking on ownership changes; fail after SETTLE_S."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE_S
    while not done():
        if loop.time() > deadline:
            owned = [log.owned_partitions for log in logs]
            raise AssertionError(f"{what}: not within {SETTLE_S}s; owned: {owned}")
        await asyncio.wait(
            [asyncio.create_task(log.wait_for_ownership_change(0.5)) for log in logs]
        )


def split(logs: list[PartitionedKafkaEventLog]) -> Callable[[], bool]:
    """True once the members own every partition between them, each some, none twice."""

    def done() -> bool:
        owned = [set(log.owned_partitions) for log in logs]
        union = set().union(*owned)
        return all(owned) and sum(map(len, owned)) == PARTITIONS == len(union)

    return done


async def start_run(log: PartitionedKafkaEventLog, run_id: str) -> None:
    """Record a running run (claimed, RunStarted, no lease): it needs a worker."""
    epoch = await log.claim_writer(run_id, owner="test")
    await log.append([Event(run_id, 1, started(), writer_epoch=epoch)])
    await log.release_lease(run_id, epoch)


def same_partition_runs(count: int, prefix: str = "cmd") -> list[str]:
    """``count`` run ids that all live on one partition (of PARTITIONS)."""
    runs = [f"{prefix}-{n}" for n in range(200)]
    first = partition_for(runs[0], PARTITIONS)
    return [r for r in runs if partition_for(r, PARTITIONS) == first][:count]


async def take(log: PartitionedKafkaEventLog, count: int) -> list[Command]:
    """Take commands until ``count`` came; fail after SETTLE_S."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE_S
    taken: list[Command] = []
    while len(taken) < count:
        if loop.time() > deadline:
            raise AssertionError(f"took {len(taken)} of {count} commands in {SETTLE_S}s: {taken}")
        taken += await log.take_commands(limit=count - len(taken))
        await log.wait_for_ownership_change(0.05)
    return taken


async def apply_start(log: PartitionedKafkaEventLog, command: Command) -> None:
    """The effect of a start command: claim the run, record its RunStarted."""
    epoch = await log.claim_writer(command.run_id, owner="test")
    await log.append([Event(command.run_id, 1, command.data, writer_epoch=epoch)])


class CommitInDoubt:
    """The owner's real producer, whose next commit fails as if the broker's answer
    were lost (a wrapper of the real producer: the broker stays real). ``landed``:
    the transaction commits first, only its outcome is hidden from the owner; else
    it stays open, and the owner's reopening of the producer aborts it."""

    def __init__(self, owner: PartitionOwner, landed: bool) -> None:
        producer = owner.producer
        assert producer is not None
        commit = producer.commit_transaction
        self.failed = 0

        async def commit_once_in_doubt() -> None:
            if self.failed:
                await commit()
                return
            self.failed += 1
            if landed:
                await commit()
            raise KafkaTimeoutError("injected: the commit's answer was lost")

        producer.commit_transaction = commit_once_in_doubt  # type: ignore[method-assign]


async def committed_records(bootstrap: str, topic: str, partition: int) -> list[ConsumerRecord]:
    """Every committed record of ``topic`` ``partition``, as a fresh reader sees them."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        records: list[ConsumerRecord] = []
        while await consumer.position(tp) < end:
            records += (await consumer.getmany(tp, timeout_ms=500)).get(tp, [])
        return records
    finally:
        await consumer.stop()
