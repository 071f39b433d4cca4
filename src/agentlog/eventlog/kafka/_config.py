"""KafkaConfig: how to reach the broker, authenticate to it, and lay out the topics."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal, get_args

from agentlog.errors import ConfigError

__all__ = ["KafkaConfig", "SaslMechanism", "SecurityProtocol"]

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

#: Fields shown as ``'***'`` in repr (and never written to logs or errors).
SECRET_FIELDS = ("sasl_password", "ssl_key_password")


@dataclass(frozen=True, repr=False)
class KafkaConfig:
    """How to reach the broker, authenticate to it, and lay out the topics.

    Its repr masks the passwords, so a config can be logged as it is.
    """

    bootstrap_servers: str
    """Comma-separated ``host:port`` of one or more brokers."""

    name: str = "agentlog"
    """Prefix of the topics ``<name>.events``, ``<name>.runs`` (and, in the
    partitioned layout, ``<name>.commands``)."""

    layout: Literal["auto", "standalone", "partitioned"] = "auto"
    """How the topics are laid out (see :mod:`agentlog.eventlog.kafka._ownership`).

    ``standalone``: one runs partition read whole by every process; any
    process claims a run and writes it (fenced per run). ``partitioned``:
    events, runs and commands topics with ``partitions`` partitions each, a
    run on partition :func:`~agentlog.eventlog.kafka._admin.partition_for`
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
    """Replicas of each topic when this log creates it (3 in production).
    Left at 1 on a cluster that looks like production (several brokers, or
    a bootstrap host that is not loopback), connecting logs a warning."""

    min_insync_replicas: int = 0
    """``min.insync.replicas`` of the topics this log creates: how many
    replicas must have a write before acks=all succeeds. 0: the smaller of 2
    and ``replication_factor``."""

    security_protocol: SecurityProtocol = "PLAINTEXT"
    """How clients talk to the broker's listener: ``PLAINTEXT``, ``SSL``
    (TLS), ``SASL_PLAINTEXT`` or ``SASL_SSL`` (SASL over TLS: MSK,
    Confluent Cloud). It must be the protocol of the listener at
    ``bootstrap_servers``."""

    sasl_mechanism: SaslMechanism = "PLAIN"
    """The SASL mechanism (``SASL_*`` protocols only): ``PLAIN``,
    ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``."""

    sasl_username: str = ""
    """The SASL user name (``SASL_*`` protocols only)."""

    sasl_password: str = ""
    """The SASL password (``SASL_*`` protocols only). Masked in repr; the
    log URL can name an environment variable that holds it instead."""

    ssl_cafile: str = ""
    """PEM file of the CA certificates that signed the broker's certificate
    (``SSL``, ``SASL_SSL``). Empty: the system's trusted CAs."""

    ssl_certfile: str = ""
    """PEM file of the client certificate, for a listener that requires one
    (mutual TLS). Its key is in ``ssl_keyfile``, or in the same file."""

    ssl_keyfile: str = ""
    """PEM file of the client certificate's private key."""

    ssl_key_password: str = ""
    """The password of an encrypted ``ssl_keyfile``. Masked in repr."""

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

    command_timeout_s: float = 60.0
    """How long a client's answer or retry to a worker fleet (a command), or
    its first read of a run it submitted, waits for the run's owning worker
    to apply or refuse it before it raises BackendUnavailableError. Long
    enough for a partition to move to another worker when one dies (a
    session timeout and a rebalance)."""

    commit_linger_s: float = 0.01
    """A group member's partition owner waits this long before a transaction
    that starts from idle, so that the writes of more of the partition's runs
    share it (Kafka Streams commits on an interval for the same reason);
    writes queued while a transaction was in flight go in the next one at
    once, having waited that long already. A
    transaction costs the worker and the broker CPU whatever it carries
    (measured: about 2.5 ms of each on the development machine), and a run's
    writes wait for it either way; 0 commits as soon as a write is queued.
    An append still returns only once its transaction is committed."""

    index_every: int = 1000
    """Rewrite a run's index entry at least every this many events, which
    bounds how far ``find_run`` reads past it."""

    def __post_init__(self) -> None:
        if not self.bootstrap_servers or not self.name:
            raise ConfigError("KafkaConfig needs bootstrap_servers and a name")
        if self.partitions < 1 or self.keep_snapshots < 1 or self.index_every < 1:
            raise ConfigError("partitions, keep_snapshots and index_every must be >= 1")
        if not 0 <= self.commit_linger_s <= 1:
            raise ConfigError(
                f"commit_linger_s must be between 0 and 1 second, got {self.commit_linger_s}"
            )
        if self.stalled_transaction_s <= 0:
            raise ConfigError("stalled_transaction_s must be > 0")
        if not self.command_timeout_s > 0:
            raise ConfigError(f"command_timeout_s must be > 0, got {self.command_timeout_s}")
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
        if self.replication_factor < 1:
            raise ConfigError(f"replication_factor must be >= 1, got {self.replication_factor}")
        if not 0 <= self.min_insync_replicas <= self.replication_factor:
            raise ConfigError(
                f"min_insync_replicas must be between 1 and replication_factor "
                f"({self.replication_factor}), got {self.min_insync_replicas}: with more "
                "in-sync replicas required than there are replicas, every write fails"
            )
        self._check_security()

    def _check_security(self) -> None:
        if self.security_protocol not in get_args(SecurityProtocol):
            raise ConfigError(
                f"security_protocol must be one of {list(get_args(SecurityProtocol))}, "
                f"not {self.security_protocol!r}"
            )
        if self.sasl_mechanism not in get_args(SaslMechanism):
            raise ConfigError(
                f"sasl_mechanism must be one of {list(get_args(SaslMechanism))}, "
                f"not {self.sasl_mechanism!r}"
            )
        sasl = self.security_protocol.startswith("SASL_")
        if sasl and not (self.sasl_username and self.sasl_password):
            raise ConfigError(
                f"security_protocol {self.security_protocol} needs sasl_username and "
                "sasl_password (in a log URL: user:password@ before the host, or "
                "sasl_username=... and sasl_password_env=VARIABLE)"
            )
        if not sasl and (self.sasl_username or self.sasl_password):
            raise ConfigError(
                f"a SASL user is set but security_protocol is {self.security_protocol}: "
                "set security_protocol to SASL_SSL (or SASL_PLAINTEXT)"
            )
        tls_files = [f for f in ("ssl_cafile", "ssl_certfile", "ssl_keyfile") if getattr(self, f)]
        if tls_files and not self.security_protocol.endswith("SSL"):
            raise ConfigError(
                f"{', '.join(tls_files)} set but security_protocol is "
                f"{self.security_protocol}, which does not use TLS: set it to SSL or SASL_SSL"
            )
        if (self.ssl_keyfile or self.ssl_key_password) and not self.ssl_certfile:
            raise ConfigError("ssl_keyfile and ssl_key_password need ssl_certfile")

    def __repr__(self) -> str:
        shown = (
            f"{f.name}={_shown(f.name, getattr(self, f.name))}" for f in dataclasses.fields(self)
        )
        return f"KafkaConfig({', '.join(shown)})"

    @property
    def listener(self) -> str:
        """The bootstrap address, protocol and SASL mechanism and user, for messages."""
        if not self.security_protocol.startswith("SASL_"):
            return f"{self.bootstrap_servers} ({self.security_protocol})"
        return (
            f"{self.bootstrap_servers} ({self.security_protocol}, {self.sasl_mechanism}, "
            f"user {self.sasl_username!r})"
        )


def _shown(name: str, value: object) -> str:
    return "'***'" if name in SECRET_FIELDS and value else repr(value)
