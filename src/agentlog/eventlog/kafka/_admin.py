"""Create and check the Kafka topics of :class:`~agentlog.eventlog.kafka.KafkaEventLog`.

Topics are created explicitly, with their configs, through aiokafka's admin
client; creating one that exists is a no-op, so every process may call
:func:`ensure_topics` at start. Then the live configs are read back, because
a topic someone else created may differ from what we asked for:

* an events topic whose ``cleanup.policy`` includes ``compact`` is refused:
  compaction keeps one record per key, which would delete all but the last
  event of every run;
* ``min.insync.replicas`` below 2 on a topic with 3 or more replicas gets a
  warning: acks=all then waits for one replica only;
* one replica on a cluster that looks like production (more than one broker
  in the metadata, or a bootstrap host that is not loopback) gets a warning
  too: losing that broker's disk loses the log (see
  :func:`production_looking`).

New topics get ``replication_factor`` replicas and ``min.insync.replicas``
from :class:`~agentlog.eventlog.kafka.KafkaConfig` (by default the smaller of
2 and the replication factor).

Two layouts (``KafkaConfig.layout``):

* standalone: ``<name>.events`` (N partitions) and ``<name>.runs`` (one
  partition, read whole by every process);
* partitioned: ``<name>.events``, ``<name>.runs`` and ``<name>.commands``,
  all with the same N partitions. A run lives on partition
  :func:`partition_for` of all three, so the consumer-group member that owns
  commands partition p owns every run on p, and a process reads only the runs
  partitions of the runs it touches. The layout of existing topics is what
  they are: a ``<name>.commands`` topic means partitioned.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import zlib
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.partitioner import murmur2

from agentlog._logging import get_logger
from agentlog.errors import ConfigError

__all__ = [
    "TOPIC_ALREADY_EXISTS",
    "TopicLayout",
    "ensure_topics",
    "partition_for",
    "production_looking",
]

_log = get_logger(__name__)

TOPIC_ALREADY_EXISTS = 36
#: Large payloads and snapshots: records up to 16 MiB.
MAX_RECORD_BYTES = 16 * 1024 * 1024


def partition_for(run_id: str, partitions: int) -> int:
    """The partition of a run in the partitioned layout, on every topic.

    Kafka's own default partitioner for a keyed record: murmur2 of the key
    (the run id as UTF-8), made positive, modulo the partition count. So a
    producer in any language that keys a command by run id lands on the
    partition we expect, and every process computes the same answer with no
    lookup. Changing the partition count moves runs: never add partitions to
    an existing partitioned topic set.
    """
    return _partition_for(run_id, partitions)


@functools.lru_cache(maxsize=1 << 14)
def _partition_for(run_id: str, partitions: int) -> int:
    # aiokafka's murmur2 is pure Python (about 35 us a call, 12% of a worker's
    # CPU per step when every write looked its partition up again); the runs
    # in flight are asked again and again, so the recent ones are kept.
    hashed: int = murmur2(run_id.encode("utf-8"))
    return (hashed & 0x7FFFFFFF) % partitions


class TopicLayout:
    """The names and partition counts of the topics one log uses."""

    def __init__(self, name: str, events_partitions: int, *, partitioned: bool = False) -> None:
        self.name = name
        self.events = f"{name}.events"
        self.runs = f"{name}.runs"
        self.commands = f"{name}.commands"
        self.events_partitions = events_partitions
        self.partitioned = partitioned

    def writer_id(self, run_id: str) -> str:
        """The transactional id of the run's writer: whoever opens it fences the others."""
        return f"{self.name}.writer.{run_id}"

    def owner_id(self, partition: int) -> str:
        """The transactional id of partition ``partition``'s owner (partitioned layout)."""
        return f"{self.name}.owner.{partition}"

    def partition_of(self, run_id: str) -> int:
        """The run's partition of the events topic and, when partitioned, every topic.

        Standalone, a run's events partition is chosen once (crc32) and kept
        in its index entry; this is the choice for a new run.
        """
        if self.partitioned:
            return partition_for(run_id, self.events_partitions)
        return zlib.crc32(run_id.encode()) % self.events_partitions

    def runs_partition(self, run_id: str) -> int:
        """The runs-topic partition of the run's index entry and snapshots."""
        return self.partition_of(run_id) if self.partitioned else 0

    def runs_partitions(self) -> range:
        """Every partition of the runs topic."""
        return range(self.events_partitions if self.partitioned else 1)


def _wanted(
    name: str, partitions: int, replication: int, partitioned: bool, min_insync: int = 0
) -> list[NewTopic]:
    min_isr = str(min_insync or min(2, replication))
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
        partitions if partitioned else 1,
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
    if not partitioned:
        return [events, runs]
    commands = NewTopic(
        f"{name}.commands",
        partitions,
        replication,
        topic_configs={
            # Consumed commands are done with once their offset is committed;
            # a week keeps the ones of a fleet that is down for days.
            "cleanup.policy": "delete",
            "retention.ms": str(7 * 24 * 3600 * 1000),
            "min.insync.replicas": min_isr,
            "max.message.bytes": str(MAX_RECORD_BYTES),
        },
    )
    return [events, runs, commands]


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
    admin: AIOKafkaAdminClient,
    name: str,
    partitions: int,
    replication: int,
    layout: str = "standalone",
    *,
    min_insync: int = 0,
    bootstrap_servers: str = "",
) -> TopicLayout:
    """Create the log's topics if missing, then check the ones that exist.

    Args:
        layout: ``standalone``, ``partitioned``, or ``auto`` (what exists;
            standalone for new topics). Existing topics keep their layout.
        min_insync: ``min.insync.replicas`` of new topics; 0 for the
            smaller of 2 and ``replication``.
        bootstrap_servers: the addresses the log was given, to tell whether
            the cluster looks like production (see :func:`production_looking`).

    Returns:
        The layout, with the events topic's real partition count (which may
        differ from ``partitions`` if the topic existed already).

    Raises:
        ConfigError: the events topic is compacted, a topic cannot be made,
            or the existing topics have another layout than ``layout`` asks.
    """
    existing = set(await admin.list_topics())
    if f"{name}.events" in existing:
        found = "partitioned" if f"{name}.commands" in existing else "standalone"
        if layout not in ("auto", found):
            raise ConfigError(
                f"the topics of log {name!r} have the {found} layout, not {layout}: "
                + (
                    "a consumer group needs the partitioned layout; use a new log name "
                    "for a worker fleet"
                    if found == "standalone"
                    else "its runs are owned by a worker fleet; open it with "
                    "layout='partitioned' (or 'auto')"
                )
            )
        layout = found
    partitioned = layout == "partitioned"
    wanted = _wanted(name, partitions, replication, partitioned, min_insync)
    response = await admin.create_topics(wanted)
    for topic_error in response.topic_errors:
        topic, code = topic_error[0], topic_error[1]
        if code not in (0, TOPIC_ALREADY_EXISTS):
            message = topic_error[2] if len(topic_error) > 2 else ""
            raise ConfigError(
                f"cannot create topic {topic!r} (error {code}: {message}); create it by hand "
                "with the configs in agentlog/eventlog/kafka/_admin.py or fix the broker's ACLs"
            )
    made = TopicLayout(name, partitions, partitioned=partitioned)
    topics = [made.events, made.runs, *([made.commands] if partitioned else [])]
    described = await _describe(admin, topics)
    made.events_partitions = len(described[made.events]["partitions"])
    if partitioned:
        _check_aligned(described, made)
    for topic in topics:
        resource = ConfigResource(ConfigResourceType.TOPIC, topic)
        responses = await admin.describe_configs([resource])
        configs = _configs(responses[0], topic)
        replicas = len(described[topic]["partitions"][0]["replicas"])
        _check(topic, configs, replicas, is_events=topic == made.events)
    single = [t for t in topics if len(described[t]["partitions"][0]["replicas"]) == 1]
    if single:
        await _warn_single_replica(admin, single, bootstrap_servers)
    return made


def production_looking(bootstrap_servers: str, brokers: int) -> str:
    """Why a cluster looks like production, or "" when it looks like a laptop's.

    Args:
        bootstrap_servers: comma-separated ``host:port`` the client was given.
        brokers: how many brokers the cluster's metadata lists.
    """
    if brokers > 1:
        return f"the cluster has {brokers} brokers"
    remote = [h for h in _hosts(bootstrap_servers) if not _loopback(h)]
    if remote:
        return f"bootstrap host {remote[0]!r} is not loopback"
    return ""


def _hosts(bootstrap_servers: str) -> list[str]:
    hosts = []
    for address in bootstrap_servers.split(","):
        host = address.strip().rpartition(":")[0] or address.strip()
        hosts.append(host.strip("[]"))
    return [h for h in hosts if h]


def _loopback(host: str) -> bool:
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a DNS name other than localhost


async def _warn_single_replica(
    admin: AIOKafkaAdminClient, topics: list[str], bootstrap_servers: str
) -> None:
    # The broker count costs a metadata request: ask only when the address
    # alone does not already say "production".
    why = production_looking(bootstrap_servers, 1)
    if not why:
        why = production_looking(
            bootstrap_servers, len((await admin.describe_cluster())["brokers"])
        )
    if why:
        _log.warning(
            "kafka_replication_factor_one",
            topics=topics,
            reason=why,
            hint="one replica: losing that broker's disk loses the log. Set "
            "replication_factor=3 (URL: ?replication_factor=3) for new topics, or raise "
            "it on these with kafka-reassign-partitions",
        )


def _check_aligned(described: dict[str, Any], layout: TopicLayout) -> None:
    """Refuse a partitioned topic set whose partition counts differ."""
    counts = {t: len(described[t]["partitions"]) for t in described}
    if len(set(counts.values())) != 1:
        raise ConfigError(
            f"the partitioned layout needs the same partition count on every topic, got "
            f"{counts}: a run's partition would differ between them. Recreate the topics "
            "with one count, or use a new log name."
        )


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
        _log.warning(
            "kafka_min_insync_replicas_low",
            topic=topic,
            replication_factor=replicas,
            min_insync_replicas=min_isr,
            hint="acks=all then waits for one replica only; set min.insync.replicas=2",
        )
