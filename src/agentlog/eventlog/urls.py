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
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from agentlog.errors import ConfigError
from agentlog.eventlog.base import EventLog

__all__ = ["DEFAULT_LOG_URL", "open_log"]

#: Where the embedded default keeps its one file.
DEFAULT_LOG_URL = "sqlite:///.agentlog/agentlog.db"


async def open_log(
    url: str = DEFAULT_LOG_URL, *, keep_snapshots: int = 3, create: bool = True
) -> EventLog:
    """Open (and, with ``create``, create where needed) the event log that ``url`` names.

    Args:
        url: the log URL (see the module table).
        keep_snapshots: how many snapshots per run the log keeps.
        create: False for readers: a log that does not exist is an error,
            never a new empty one.

    Raises:
        ConfigError: the URL's scheme or shape is not one of the above, or
            ``create`` is False and there is no log at ``url``.
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
        if not create and not Path(path).is_file():  # noqa: ASYNC240 - one stat
            raise ConfigError(
                f"no log at {path} ({url}): check --log or AGENTLOG_LOG; commands that "
                "only read never create a log"
            )
        return SqliteEventLog(path, keep_snapshots=keep_snapshots)
    if parts.scheme == "kafka":
        from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog

        name = parts.path.strip("/")
        if not parts.netloc or not name:
            raise ConfigError(
                f"bad log URL {url!r}: write kafka://host:port/name, for example "
                "kafka://127.0.0.1:9092/agentlog"
            )
        return await KafkaEventLog.connect(
            KafkaConfig(bootstrap_servers=parts.netloc, name=name, keep_snapshots=keep_snapshots)
        )
    raise ConfigError(
        f"bad log URL {url!r}: the scheme must be sqlite://, kafka:// or memory://, "
        f"for example {DEFAULT_LOG_URL}"
    )
