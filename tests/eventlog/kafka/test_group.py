"""Partitioned layout and consumer-group ownership on the real broker.

Two members split the partitions; each lists (``runnable``) and writes only
its own partitions' runs; a third member moves ownership; a client that is
not a member reads and sends commands but writes nothing.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from agentlog.errors import BackendUnavailableError, ConfigError, NotOwnerError
from agentlog.eventlog.events import Event, StepCompleted
from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog
from agentlog.eventlog.kafka._admin import partition_for
from tests.eventlog.kafka.group_support import (
    PARTITIONS,
    open_log,
    settle,
    split,
    start_run,
    started,
)

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

RUNS = [f"run-{n}" for n in range(16)]


def test_partition_for_is_kafkas_default_partitioner() -> None:
    # The Java client's murmur2 partitioner gives these for these keys
    # (org.apache.kafka.common.utils.Utils.murmur2, toPositive, modulo).
    assert partition_for("", 12) == (275646681 & 0x7FFFFFFF) % 12
    assert {partition_for(run, PARTITIONS) for run in RUNS} == set(range(PARTITIONS))
    assert all(partition_for(run, 7) == partition_for(run, 7) for run in RUNS)


async def test_two_members_split_the_partitions_and_list_only_their_runs(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    first = await open_log(kafka_bootstrap, kafka_name, "workers")
    second = None
    try:
        await settle([first], lambda: len(first.owned_partitions) == PARTITIONS, "one member")
        for run_id in RUNS:
            await start_run(first, run_id)
        assert {i.run_id for i in await first.runnable()} == set(RUNS)
        # One producer per owned partition, however many runs it wrote.
        assert first.transactional_producers == PARTITIONS

        second = await open_log(kafka_bootstrap, kafka_name, "workers")
        await settle([first, second], split([first, second]), "two members")
        listed = {}
        for member in (first, second):
            runs = {i.run_id for i in await member.runnable()}
            owned = set(member.owned_partitions)
            assert {partition_for(r, PARTITIONS) for r in runs} <= owned
            assert runs == {r for r in RUNS if partition_for(r, PARTITIONS) in owned}
            assert member.transactional_producers == len(owned)
            listed[id(member)] = runs
        assert set().union(*listed.values()) == set(RUNS)
        assert not set.intersection(*listed.values())

        # The new owner writes on where the first left off; the first may not.
        moved = next(r for r in RUNS if partition_for(r, PARTITIONS) in second.owned_partitions)
        info = await second.get_run(moved)
        epoch = await second.claim_writer(moved, owner="second")
        assert epoch == info.writer_epoch + 1
        await second.append([Event(moved, 2, StepCompleted("s", 1, 0, {}), writer_epoch=epoch)])
        with pytest.raises(NotOwnerError):
            await first.append([Event(moved, 3, StepCompleted("s", 2, 0, {}), writer_epoch=epoch)])
        assert [e.seq async for e in first.read(moved)] == [1, 2]
    finally:
        for log in (first, second):
            if log is not None:
                await log.close()


async def test_a_third_member_takes_partitions_over(kafka_bootstrap: str, kafka_name: str) -> None:
    logs = [await open_log(kafka_bootstrap, kafka_name, "workers") for _ in range(2)]
    try:
        await settle(logs, split(logs), "two members")
        for run_id in RUNS:
            owner = next(m for m in logs if partition_for(run_id, PARTITIONS) in m.owned_partitions)
            await start_run(owner, run_id)
        logs.append(await open_log(kafka_bootstrap, kafka_name, "workers"))
        await settle(logs, split(logs), "three members")
        third = logs[2]
        mine = {r for r in RUNS if partition_for(r, PARTITIONS) in third.owned_partitions}
        assert mine
        assert {i.run_id for i in await third.runnable()} == mine
        for other in logs[:2]:
            assert not mine & {i.run_id for i in await other.runnable()}
    finally:
        for log in logs:
            await log.close()


async def test_a_client_reads_but_never_writes(kafka_bootstrap: str, kafka_name: str) -> None:
    member = await open_log(kafka_bootstrap, kafka_name, "workers")
    client = await open_log(kafka_bootstrap, kafka_name)
    try:
        assert not client.direct_writes and not member.direct_writes
        await settle([member], lambda: len(member.owned_partitions) == PARTITIONS, "member")
        await start_run(member, "r1")
        assert (await client.get_run("r1")).last_seq == 1
        assert [e.seq async for e in client.read("r1")] == [1]
        assert await client.runnable() == []
        with pytest.raises(NotOwnerError, match="send a command"):
            await client.append([Event("r2", 1, started())])
        with pytest.raises(NotOwnerError):
            await client.claim_writer("r1")
        assert client.transactional_producers == 0
    finally:
        await client.close()
        await member.close()


async def test_a_group_on_standalone_topics_is_refused(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    standalone = await KafkaEventLog.connect(
        KafkaConfig(bootstrap_servers=kafka_bootstrap, name=kafka_name)
    )
    await standalone.close()
    with pytest.raises(ConfigError, match="partitioned layout"):
        await KafkaEventLog.connect(
            KafkaConfig(bootstrap_servers=kafka_bootstrap, name=kafka_name, group_id="g")
        )


async def test_many_runs_share_the_partition_producers_and_commits(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    """200 runs in flight: one producer per owned partition, and concurrent
    writes of a partition's runs share transactions (group commit)."""
    member = await open_log(kafka_bootstrap, kafka_name, "workers")
    try:
        await settle([member], lambda: len(member.owned_partitions) == PARTITIONS, "member")
        runs = [f"many-{n}" for n in range(200)]
        await asyncio.gather(*(start_run(member, run_id) for run_id in runs))
        assert member.transactional_producers == PARTITIONS
        assert member.member is not None
        commits = sum(o.commits for o in member.member.owners.values())
        assert commits < len(runs) * 3  # three writes per run, far fewer transactions
        assert {i.run_id for i in await member.runnable(limit=1000)} == set(runs)
    finally:
        await member.close()


async def test_an_unreachable_broker_says_so_in_group_mode(kafka_name: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once we leave: nothing listens
    config = KafkaConfig(
        bootstrap_servers=f"127.0.0.1:{port}",
        name=kafka_name,
        group_id="workers",
        connect_timeout_s=2.0,
    )
    with pytest.raises(BackendUnavailableError, match="start the broker"):
        await KafkaEventLog.connect(config)
