"""Bad input on Kafka: a typed error naming what is wrong, and other runs keep going."""

from __future__ import annotations

import socket

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from structlog.testing import capture_logs

from agentlog.errors import BackendUnavailableError, ConfigError, CorruptEventError
from agentlog.eventlog.codec import encode_event
from agentlog.eventlog.events import Event, TaskCompleted
from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog
from agentlog.eventlog.kafka._admin import _check

pytestmark = pytest.mark.kafka


def _dead_address() -> str:
    # A port that was free a moment ago: nothing listens there.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def _events(run_id: str, first: int, count: int, epoch: int = 0) -> list[Event]:
    return [
        Event(run_id, seq, TaskCompleted("k", seq), writer_epoch=epoch)
        for seq in range(first, first + count)
    ]


async def test_unreachable_broker_raises_within_the_timeout() -> None:
    address = _dead_address()
    config = KafkaConfig(bootstrap_servers=address, name="x", connect_timeout_s=2)
    with pytest.raises(BackendUnavailableError) as caught:
        await KafkaEventLog.connect(config)
    assert address in str(caught.value)
    assert "2s" in str(caught.value)
    assert caught.value.retryable


async def test_compacted_events_topic_is_refused(kafka_bootstrap: str, kafka_name: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        topic = NewTopic(f"{kafka_name}.events", 1, 1, topic_configs={"cleanup.policy": "compact"})
        await admin.create_topics([topic])
    finally:
        await admin.close()
    with pytest.raises(ConfigError) as caught:
        await KafkaEventLog.connect(KafkaConfig(bootstrap_servers=kafka_bootstrap, name=kafka_name))
    assert f"{kafka_name}.events" in str(caught.value)
    assert "cleanup.policy=compact" in str(caught.value)


async def test_topics_get_the_configs_the_design_asks_for(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    config = KafkaConfig(bootstrap_servers=kafka_bootstrap, name=kafka_name, partitions=3)
    async with await KafkaEventLog.connect(config):
        pass
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        got = {}
        for topic in (f"{kafka_name}.events", f"{kafka_name}.runs"):
            (response,) = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic)]
            )
            got[topic] = {entry[0]: entry[1] for entry in response.resources[0][4]}
        described = await admin.describe_topics([f"{kafka_name}.events"])
    finally:
        await admin.close()
    assert got[f"{kafka_name}.events"]["cleanup.policy"] == "delete"
    assert got[f"{kafka_name}.events"]["retention.ms"] == "-1"
    assert got[f"{kafka_name}.runs"]["cleanup.policy"] == "compact"
    assert len(described[0]["partitions"]) == 3


async def test_acks_other_than_all_warns(kafka_bootstrap: str, kafka_name: str) -> None:
    config = KafkaConfig(bootstrap_servers=kafka_bootstrap, name=kafka_name, acks="1")
    with capture_logs() as logs:
        async with await KafkaEventLog.connect(config):
            pass
    assert any(e["event"] == "kafka_acks_not_all" and e["acks"] == "1" for e in logs)


def test_low_min_insync_replicas_warns_only_with_three_replicas() -> None:
    with capture_logs() as logs:
        _check(
            "t.events", {"cleanup.policy": "delete", "min.insync.replicas": "1"}, 3, is_events=True
        )
        _check(
            "t.events", {"cleanup.policy": "delete", "min.insync.replicas": "1"}, 1, is_events=True
        )
        _check(
            "t.events", {"cleanup.policy": "delete", "min.insync.replicas": "2"}, 3, is_events=True
        )
    warned = [e for e in logs if e["event"] == "kafka_min_insync_replicas_low"]
    assert [(e["replication_factor"], e["min_insync_replicas"]) for e in warned] == [(3, 1)]


async def test_corrupt_record_names_topic_partition_offset_and_others_keep_going(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    config = KafkaConfig(bootstrap_servers=kafka_bootstrap, name=kafka_name, partitions=1)
    async with await KafkaEventLog.connect(config) as log:
        await log.append(_events("bad", 1, 2))
        await log.append(_events("good", 1, 2))
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
        await producer.start()
        try:
            meta = await producer.send_and_wait(
                f"{kafka_name}.events", b"\xc1 not msgpack", key=b"bad", partition=0
            )
        finally:
            await producer.stop()
        await log.append(_events("good", 3, 2))

        with pytest.raises(CorruptEventError) as caught:
            _ = [e async for e in log.read("bad")]
        where = f"topic {kafka_name}.events partition 0 offset {meta.offset}"
        assert caught.value.where == where
        assert where in str(caught.value)
        # The run that shares the partition still reads, every event of it.
        assert [e.seq async for e in log.read("good")] == [1, 2, 3, 4]
        assert (await log.get_run("good")).last_seq == 4


async def test_event_of_a_stale_writer_epoch_on_the_topic_is_a_typed_error(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    config = KafkaConfig(bootstrap_servers=kafka_bootstrap, name=kafka_name, partitions=1)
    async with await KafkaEventLog.connect(config) as log:
        epoch = await log.claim_writer("r")
        epoch = await log.claim_writer("r")
        await log.append(_events("r", 1, 2, epoch=epoch))
        # Bytes a zombie writer could only have written by going around the
        # producer fence: seq 3 under the older epoch.
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
        await producer.start()
        try:
            stale = encode_event(_events("r", 3, 1, epoch=epoch - 1)[0])
            meta = await producer.send_and_wait(
                f"{kafka_name}.events", stale, key=b"r", partition=0
            )
        finally:
            await producer.stop()
        with pytest.raises(CorruptEventError) as caught:
            _ = [e async for e in log.read("r")]
        assert caught.value.seq == 3
        assert f"offset {meta.offset}" in caught.value.where
        assert "stale writer" in str(caught.value)
