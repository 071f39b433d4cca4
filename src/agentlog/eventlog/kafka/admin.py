"""Create and check the Kafka topics of :class:`~agentlog.eventlog.kafka.KafkaEventLog`.

Topics are created explicitly, with their configs, through aiokafka's admin
client; creating one that exists is a no-op, so every process may call
:func:`ensure_topics` at start. Then the live configs are read back, because
a topic someone else created may differ from what we asked for:

* an events topic whose ``cleanup.policy`` includes ``compact`` is refused:
  compaction keeps one record per key, which would delete all but the last
  event of every run;
* ``min.insync.replicas`` below 2 on a topic with 3 or more replicas gets a
  warning: acks=all then waits for one replica only.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from agentlog._logging import get_logger
from agentlog.errors import ConfigError

__all__ = ["TOPIC_ALREADY_EXISTS", "TopicLayout", "ensure_topics"]

log = get_logger(__name__)

TOPIC_ALREADY_EXISTS = 36
#: Large payloads and snapshots: records up to 16 MiB.
MAX_RECORD_BYTES = 16 * 1024 * 1024


class TopicLayout:
    """The names and partition counts of the topics one log uses."""

    def __init__(self, name: str, events_partitions: int) -> None:
        self.name = name
        self.events = f"{name}.events"
        self.runs = f"{name}.runs"
        self.events_partitions = events_partitions

    def writer_id(self, run_id: str) -> str:
        """The transactional id of the run's writer: whoever opens it fences the others."""
        return f"{self.name}.writer.{run_id}"


def _wanted(name: str, partitions: int, replication: int) -> list[NewTopic]:
    min_isr = str(min(2, replication))
    events = NewTopic(
        f"{name}.events",
        partitions,
        replication,
        topic_configs={
            # Never compact: that would keep one event per run. Never expire
            # either: the archiver prunes runs once they are safely archived.
            "cleanup.policy": "delete",
            "retention.ms": "-1",
            "retention.bytes": "-1",
            "min.insync.replicas": min_isr,
            "max.message.bytes": str(MAX_RECORD_BYTES),
        },
    )
    runs = NewTopic(
        f"{name}.runs",
        1,
        replication,
        topic_configs={
            "cleanup.policy": "compact",
            "min.insync.replicas": min_isr,
            "max.message.bytes": str(MAX_RECORD_BYTES),
            # Keep the uncompacted head small: every process reads this topic
            # from the start when it connects.
            "segment.bytes": str(16 * 1024 * 1024),
            "segment.ms": "600000",
            "min.cleanable.dirty.ratio": "0.1",
        },
    )
    return [events, runs]


def _configs(response: Any, topic: str) -> dict[str, str]:
    for resource in response.resources:
        error_code, message, _type, name, entries = resource[:5]
        if name != topic:
            continue
        if error_code:
            raise ConfigError(f"cannot read the configs of topic {topic!r}: {message}")
        return {entry[0]: entry[1] for entry in entries}
    raise ConfigError(f"the broker did not describe topic {topic!r}")


async def ensure_topics(
    admin: AIOKafkaAdminClient, name: str, partitions: int, replication: int
) -> TopicLayout:
    """Create the log's topics if missing, then check the ones that exist.

    Returns:
        The layout, with the events topic's real partition count (which may
        differ from ``partitions`` if the topic existed already).

    Raises:
        ConfigError: the events topic is compacted, or a topic cannot be made.
    """
    wanted = _wanted(name, partitions, replication)
    response = await admin.create_topics(wanted)
    for topic_error in response.topic_errors:
        topic, code = topic_error[0], topic_error[1]
        if code not in (0, TOPIC_ALREADY_EXISTS):
            message = topic_error[2] if len(topic_error) > 2 else ""
            raise ConfigError(
                f"cannot create topic {topic!r} (error {code}: {message}); create it by hand "
                "with the configs in agentlog/eventlog/kafka/admin.py or fix the broker's ACLs"
            )
    layout = TopicLayout(name, partitions)
    described = await _describe(admin, [layout.events, layout.runs])
    layout.events_partitions = len(described[layout.events]["partitions"])
    for topic in (layout.events, layout.runs):
        resource = ConfigResource(ConfigResourceType.TOPIC, topic)
        responses = await admin.describe_configs([resource])
        configs = _configs(responses[0], topic)
        replicas = len(described[topic]["partitions"][0]["replicas"])
        _check(topic, configs, replicas, is_events=topic == layout.events)
    return layout


async def _describe(admin: AIOKafkaAdminClient, topics: list[str]) -> dict[str, Any]:
    # A topic just created shows up in the metadata a moment later; the
    # caller's connect timeout bounds this wait.
    while True:
        described = {t["topic"]: t for t in await admin.describe_topics(topics)}
        if all(
            described.get(t) and not described[t].get("error_code") and described[t]["partitions"]
            for t in topics
        ):
            return described
        await asyncio.sleep(0.05)


def _check(topic: str, configs: dict[str, str], replicas: int, *, is_events: bool) -> None:
    policy = configs.get("cleanup.policy", "delete")
    if is_events and "compact" in policy:
        raise ConfigError(
            f"topic {topic!r} has cleanup.policy={policy}: a compacted events topic keeps "
            "only the last event of each run and loses the rest. Set it to delete "
            f"(kafka-configs --alter --entity-type topics --entity-name {topic} "
            "--add-config cleanup.policy=delete) or use another log name."
        )
    min_isr = int(configs.get("min.insync.replicas", "1"))
    if replicas >= 3 and min_isr < 2:
        log.warning(
            "kafka_min_insync_replicas_low",
            topic=topic,
            replication_factor=replicas,
            min_insync_replicas=min_isr,
            hint="acks=all then waits for one replica only; set min.insync.replicas=2",
        )
