"""KafkaConfig: how to reach the broker and lay out the topics."""

from __future__ import annotations

from dataclasses import dataclass

from agentlog.errors import ConfigError

__all__ = ["KafkaConfig"]


@dataclass(frozen=True)
class KafkaConfig:
    """How to reach the broker and lay out the topics."""

    bootstrap_servers: str
    """Comma-separated ``host:port`` of one or more brokers."""

    name: str = "agentlog"
    """Prefix of the topics ``<name>.events`` and ``<name>.runs``."""

    keep_snapshots: int = 3
    """How many of a run's newest snapshots to keep."""

    partitions: int = 8
    """Partitions of the events topic when this log creates it."""

    replication_factor: int = 1
    """Replicas of each topic when this log creates it (3 in production)."""

    acks: str = "all"
    """Producer acks. Fencing needs an idempotent transactional producer,
    which Kafka allows only with ``all``; any other value is logged as a
    warning and ``all`` is used."""

    connect_timeout_s: float = 10.0
    """How long :meth:`KafkaEventLog.connect` waits for the broker before
    raising BackendUnavailableError."""

    request_timeout_s: float = 30.0
    """How long one read, or one append across broker restarts, may take
    before it raises BackendUnavailableError."""

    transaction_timeout_s: float = 15.0
    """The broker aborts a transaction left open this long by a dead writer.
    Readers do not wait for it: see ``stalled_transaction_s``."""

    stalled_transaction_s: float = 2.0
    """A read held this long by one open transaction aborts it, by opening
    the transactional id of the run that wrote it (a dead writer's would
    otherwise hold every reader of the partition for
    ``transaction_timeout_s``). A healthy transaction lasts milliseconds; a
    live writer whose transaction is aborted only retries it."""

    index_every: int = 1000
    """Rewrite a run's index entry at least every this many events, which
    bounds how far ``find_run`` reads past it."""

    def __post_init__(self) -> None:
        if not self.bootstrap_servers or not self.name:
            raise ConfigError("KafkaConfig needs bootstrap_servers and a name")
        if self.partitions < 1 or self.keep_snapshots < 1 or self.index_every < 1:
            raise ConfigError("partitions, keep_snapshots and index_every must be >= 1")
        if self.stalled_transaction_s <= 0:
            raise ConfigError("stalled_transaction_s must be > 0")
