"""Open an event log from a connection URL.

=====================================  ============================================
URL                                    backend
=====================================  ============================================
``sqlite:///relative/path.db``         :class:`SqliteEventLog` (the default is
``sqlite:////absolute/path.db``        ``sqlite:///.agentlog/agentlog.db``)
``memory://``                          :class:`MemoryEventLog` (tests only)
``kafka://host:port[,host:port]/name``  ``KafkaEventLog``; ``name`` prefixes the
                                       topics ``name.events`` and ``name.runs``
=====================================  ============================================

A Kafka URL takes query parameters for a fleet of workers (see
:class:`~agentlog.eventlog.kafka.KafkaConfig`): ``group=ID`` joins the
consumer group ``ID`` (a worker: it owns the runs of the partitions the group
assigns it); ``layout=partitioned`` reads and sends commands to a fleet's
topics without joining (a client); ``partitions=N`` sizes new topics;
``session_timeout=S`` is the group session timeout in seconds.
``kafka://127.0.0.1:9092/agentlog?group=workers&partitions=12``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from agentlog.errors import ConfigError
from agentlog.eventlog.base import EventLog

__all__ = ["DEFAULT_LOG_URL", "open_log"]

#: Where the embedded default keeps its one file.
DEFAULT_LOG_URL = "sqlite:///.agentlog/agentlog.db"


async def open_log(
    url: str = DEFAULT_LOG_URL, *, create: bool = True, keep_snapshots: int = 3
) -> EventLog:
    """Open the event log that ``url`` names, creating it where needed.

    Args:
        create: create a missing SQLite file (and its directories). Commands
            that only read pass False: a mistyped path is then an error, not
            a new empty log. A file that cannot be written (a read-only file
            or filesystem) is opened read-only and can still be read.
        keep_snapshots: how many of each run's newest snapshots to keep.

    Raises:
        ConfigError: the URL's scheme or shape is not one of the above, or
            ``create`` is False and there is no log at the path.
        BackendUnavailableError: the file or broker cannot be reached.
    """
    parts = urlsplit(url)
    if parts.scheme == "memory":
        from agentlog.eventlog.memory import MemoryEventLog

        return MemoryEventLog(keep_snapshots=keep_snapshots)
    if parts.scheme == "sqlite":
        from agentlog.eventlog.sqlite import SqliteEventLog

        path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else ""
        if not path:
            raise ConfigError(
                f"bad log URL {url!r}: write sqlite:///relative/file.db or "
                "sqlite:////absolute/file.db"
            )
        return SqliteEventLog(path, keep_snapshots=keep_snapshots, create=create)
    if parts.scheme == "kafka":
        from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog

        name = parts.path.strip("/")
        if not parts.netloc or not name:
            raise ConfigError(
                f"bad log URL {url!r}: write kafka://host:port/name, for example "
                "kafka://127.0.0.1:9092/agentlog"
            )
        return await KafkaEventLog.connect(
            KafkaConfig(
                bootstrap_servers=parts.netloc,
                name=name,
                keep_snapshots=keep_snapshots,
                **_kafka_options(url, parts.query),
            )
        )
    raise ConfigError(
        f"bad log URL {url!r}: the scheme must be sqlite://, kafka:// or memory://, "
        f"for example {DEFAULT_LOG_URL}"
    )


#: Kafka URL query parameters -> (KafkaConfig field, type).
_KAFKA_OPTIONS: dict[str, tuple[str, type]] = {
    "group": ("group_id", str),
    "layout": ("layout", str),
    "partitions": ("partitions", int),
    "session_timeout": ("session_timeout_s", float),
}


def _kafka_options(url: str, query: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for key, values in parse_qs(query, keep_blank_values=True).items():
        if key not in _KAFKA_OPTIONS:
            raise ConfigError(
                f"bad log URL {url!r}: unknown parameter {key!r}; a kafka:// URL takes "
                f"{sorted(_KAFKA_OPTIONS)}"
            )
        field_name, kind = _KAFKA_OPTIONS[key]
        try:
            options[field_name] = kind(values[-1])
        except ValueError:
            raise ConfigError(
                f"bad log URL {url!r}: {key}={values[-1]!r} is not a {kind.__name__}"
            ) from None
    return options
