"""KafkaConfig: how to reach the broker and lay out the topics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agentlog.errors import ConfigError

__all__ = ["KafkaConfig"]


@dataclass(frozen=True)
class KafkaConfig:
    """How to reach the broker and lay out the topics."""

    bootstrap_servers: str
    """Comma-separated ``host:port`` of one or more brokers."""

    name: str = "agentlog"
    """Prefix of the topics ``<name>.events``, ``<name>.runs`` (and, in the
    partitioned layout, ``<name>.commands``)."""

    layout: Literal["auto", "standalone", "partitioned"] = "auto"
    """How the topics are laid out (see :mod:`agentlog.eventlog.kafka.ownership`).

    ``standalone``: one runs partition read whole by every process; any
    process claims a run and writes it (fenced per run). ``partitioned``:
    events, runs and commands topics with ``partitions`` partitions each, a
    run on partition :func:`~agentlog.eventlog.kafka.admin.partition_for`
    of all three; the members of ``group_id`` own the partitions and are the
    only writers, and every other process sends commands. ``auto``: what the
    existing topics say (a ``<name>.commands`` topic means partitioned); for
    new topics, partitioned when ``group_id`` is set, else standalone.
    Clients of a worker fleet should say ``partitioned``, so that a client
    that starts before any worker does not create the standalone layout."""

    group_id: str = ""
    """Join this consumer group: the log then owns (writes) the runs of the
    partitions the group assigns it. Needs the partitioned layout. Empty: not
    a member (a client: it reads, and sends commands)."""

    session_timeout_s: float = 10.0
    """A member that sends no heartbeat this long is dropped from the group
    and its partitions go to the others (failover time). Its writes after
    that are fenced by the new owner's transactional id, not by this clock."""

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
        if self.layout not in ("auto", "standalone", "partitioned"):
            raise ConfigError(
                f"layout must be 'auto', 'standalone' or 'partitioned', not {self.layout!r}"
            )
        if self.group_id and self.layout == "standalone":
            raise ConfigError(
                "a consumer group (group_id) owns partitions of runs: it needs "
                "layout='partitioned' (or 'auto'), not 'standalone'"
            )
        if not self.session_timeout_s >= 1:
            raise ConfigError(f"session_timeout_s must be >= 1, got {self.session_timeout_s}")
