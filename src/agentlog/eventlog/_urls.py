"""Open an event log from a connection URL.

=====================================  ============================================
URL                                    backend
=====================================  ============================================
``sqlite:///relative/path.db``         :class:`SqliteEventLog` (the default is
``sqlite:////absolute/path.db``        ``sqlite:///.agentlog/agentlog.db``); a new
                                       file is 0600, ``?file_mode=0640`` says
                                       otherwise
``memory://``                          :class:`MemoryEventLog` (tests only)
``kafka://host:port[,host:port]/name``  ``KafkaEventLog``; ``name`` prefixes the
                                       topics ``name.events`` and ``name.runs``
``postgresql://user:pw@host:port/db``  ``PostgresEventLog``; ``?connect_timeout=S``
                                       (default 15) bounds the retries of a server
                                       that is down, ``?pool_size=N`` (default 10);
                                       other parameters go to libpq (``sslmode``)
``redis://[:password@]host:port/db``   ``RedisEventLog`` (Redis Streams); options
                                       ``prefix=``, ``allow_volatile=true``,
                                       ``connect_attempts=N``
=====================================  ============================================

A Kafka URL takes query parameters for a fleet of workers (see
:class:`~agentlog.eventlog.kafka.KafkaConfig`): ``group=ID`` joins the
consumer group ``ID`` (a worker: it owns the runs of the partitions the group
assigns it); ``layout=partitioned`` reads and sends commands to a fleet's
topics without joining (a client); ``partitions=N`` sizes new topics;
``session_timeout=S`` is the group session timeout in seconds;
``command_timeout=S`` bounds how long a client's request (or its first read
of a run it submitted) waits for the run's owning worker (default 60);
``commit_linger=S`` is how long a worker gathers a partition's writes into
one transaction (default 0.01).
``kafka://127.0.0.1:9092/agentlog?group=workers&partitions=12``.

For new topics, ``replication_factor=N`` and ``min_insync_replicas=N``.

For a secured cluster (each maps to the KafkaConfig field of the same name):

=====================================  ============================================
``user:password@`` before the hosts    SASL user and password (percent-encoded);
                                       implies ``security_protocol=SASL_SSL``
``security_protocol=``                 ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``,
                                       ``SASL_SSL``
``sasl_mechanism=``                    ``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``
``sasl_username=``                     the SASL user, instead of ``user@``
``sasl_password_env=NAME``             read the SASL password from environment
                                       variable ``NAME`` (keeps it out of the URL)
``ssl_cafile=PATH``                    PEM of the CA that signed the broker's
                                       certificate (default: the system's CAs)
``ssl_certfile=``, ``ssl_keyfile=``    PEM client certificate and key (mutual TLS)
``ssl_key_password_env=NAME``          the client key's password, from ``NAME``
=====================================  ============================================

``kafka://alice@b-1.example.com:9096/agentlog?sasl_mechanism=SCRAM-SHA-512&sasl_password_env=KAFKA_PASSWORD``.
Wherever a URL is printed (errors, logs, the UI, CLI output), its password
and the values of parameters named like secrets (``password=``, ``token=``,
``sasl_password=``...) are masked as ``***`` (:func:`redact_url`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from agentlog._files import DEFAULT_FILE_MODE, parse_file_mode
from agentlog.crypto import KeyStore, PayloadCipher
from agentlog.errors import ConfigError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog._redaction import MASK, is_secret_name, redact_url, shown_param

if TYPE_CHECKING:
    from agentlog.eventlog.kafka._config import KafkaConfig
    from agentlog.eventlog.sqlite._log import SqliteEventLog

__all__ = [
    "DEFAULT_LOG_URL",
    "MASK",
    "file_mode_option",
    "is_secret_name",
    "kafka_config",
    "log_location",
    "open_log",
    "open_sqlite_log",
    "redact_url",
    "sqlite_file",
    "shown_param",
]

#: Where the embedded default keeps its one file.
DEFAULT_LOG_URL = "sqlite:///.agentlog/agentlog.db"


async def open_log(
    url: str = DEFAULT_LOG_URL,
    *,
    create: bool = True,
    keep_snapshots: int = 3,
    keys: KeyStore | PayloadCipher | None = None,
) -> EventLog:
    """Open the event log that ``url`` names, creating it where needed.

    Args:
        create: create a missing SQLite file (and its directories). Commands
            that only read pass False: a mistyped path is then an error, not
            a new empty log. A file that cannot be written (a read-only file
            or filesystem) is opened read-only and can still be read.
        keep_snapshots: how many of each run's newest snapshots to keep.
        keys: encrypt payloads at rest with per-run data keys from this key
            store (:class:`~agentlog.crypto.LocalKeyStore`, the one
            ``AGENTLOG_KEYRING`` names, or :class:`~agentlog.crypto.KmsKeyStore`);
            see docs/security.md. None: payloads are stored in clear, and
            encrypted ones read back with their content unreadable.

    Raises:
        ConfigError: the URL's scheme or shape is not one of the above, or
            ``create`` is False and there is no log at the path.
        BackendUnavailableError: the file or broker cannot be reached.
    """
    cipher = keys if isinstance(keys, PayloadCipher) or keys is None else PayloadCipher(keys)
    parts = urlsplit(url)
    if parts.scheme == "memory":
        from agentlog.eventlog.memory import MemoryEventLog

        if cipher is not None:
            raise ConfigError(
                "memory:// keeps nothing at rest, so it has nothing to encrypt: pass keys= "
                "with a sqlite:// or kafka:// log"
            )

        return MemoryEventLog(keep_snapshots=keep_snapshots)
    if parts.scheme == "sqlite":
        return open_sqlite_log(url, create=create, keep_snapshots=keep_snapshots, cipher=cipher)
    if parts.scheme == "kafka":
        from agentlog.eventlog.kafka import KafkaEventLog

        return await KafkaEventLog.connect(
            kafka_config(url, keep_snapshots=keep_snapshots), cipher=cipher
        )
    if parts.scheme in ("postgresql", "postgres"):
        from agentlog.eventlog.postgres._log import PostgresEventLog

        return await PostgresEventLog.connect(url, keep_snapshots=keep_snapshots, cipher=cipher)
    if parts.scheme == "redis":
        from agentlog.eventlog.redis._connection import redis_config
        from agentlog.eventlog.redis._log import RedisEventLog

        config = redis_config(url, redact_url(url), keep_snapshots=keep_snapshots)
        return await RedisEventLog.connect(config, cipher=cipher)
    raise ConfigError(
        f"bad log URL {redact_url(url)!r}: the scheme must be sqlite://, kafka://, "
        f"postgresql://, redis:// or memory://, for example {DEFAULT_LOG_URL}"
    )


def open_sqlite_log(
    url: str, *, create: bool = True, keep_snapshots: int = 3, cipher: PayloadCipher | None = None
) -> SqliteEventLog:
    """:func:`open_log` for a ``sqlite://`` URL, with no event loop (the SQLite
    log opens synchronously): for a caller that has none to run."""
    from agentlog.eventlog.sqlite._log import SqliteEventLog

    path, query = _sqlite_parts(url)
    return SqliteEventLog(
        path,
        keep_snapshots=keep_snapshots,
        create=create,
        cipher=cipher,
        file_mode=file_mode_option(url, query),
    )


def _sqlite_parts(url: str) -> tuple[str, str]:
    """The file path and the query of a ``sqlite:///`` URL.

    Raises:
        ConfigError: no path after ``sqlite:///``.
    """
    path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else ""
    path, _, query = path.partition("?")
    if not path:
        raise ConfigError(
            f"bad log URL {redact_url(url)!r}: write sqlite:///relative/file.db or "
            "sqlite:////absolute/file.db"
        )
    return path, query


def sqlite_file(url: str) -> str | None:
    """The absolute path of the file a ``sqlite://`` log URL names (a relative
    one is read from the current directory); None for any other backend.

    Raises:
        ConfigError: a ``sqlite://`` URL with no path.
    """
    if urlsplit(url).scheme != "sqlite":
        return None
    return os.path.abspath(_sqlite_parts(url)[0])


def log_location(url: str) -> str:
    """Where the log at ``url`` is, as a person should be shown it: a SQLite
    log's absolute file path (so a relative URL cannot hide which folder it
    was read from), any other backend's URL with its secrets masked."""
    return sqlite_file(url) or redact_url(url)


def file_mode_option(url: str, query: str) -> int:
    """The ``file_mode=`` of a ``sqlite://`` or ``file://`` URL's query (the only
    parameter they take), or 0600.

    Raises:
        ConfigError: another parameter, or a mode that does not fit.
    """
    mode = DEFAULT_FILE_MODE
    if not query:
        return mode
    for key, values in parse_qs(query, keep_blank_values=True).items():
        if key != "file_mode":
            raise ConfigError(
                f"bad URL {redact_url(url)!r}: unknown parameter {key!r}; the only one is "
                "file_mode (such as file_mode=0640; the default is 0600)"
            )
        mode = parse_file_mode(values[-1], f"bad URL {redact_url(url)!r}")
    return mode


def kafka_config(url: str, *, keep_snapshots: int = 3) -> KafkaConfig:
    """The :class:`~agentlog.eventlog.kafka.KafkaConfig` that a ``kafka://`` URL names.

    Reads the environment variables that ``sasl_password_env`` and
    ``ssl_key_password_env`` name.

    Raises:
        ConfigError: the URL's shape or a parameter is wrong, or a named
            environment variable is not set.
    """
    from agentlog.eventlog.kafka import KafkaConfig

    parts = urlsplit(url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    name = parts.path.strip("/")
    if parts.scheme != "kafka" or not hosts or not name:
        raise ConfigError(
            f"bad log URL {redact_url(url)!r}: write kafka://host:port/name, for example "
            "kafka://127.0.0.1:9092/agentlog"
        )
    options = _kafka_options(url, parts.query)
    if at:
        user, colon, password = userinfo.partition(":")
        options.setdefault("sasl_username", unquote(user))
        if colon:
            options.setdefault("sasl_password", unquote(password))
        options.setdefault("security_protocol", "SASL_SSL")
    return KafkaConfig(bootstrap_servers=hosts, name=name, keep_snapshots=keep_snapshots, **options)


#: Kafka URL query parameters -> (KafkaConfig field, type); ``env`` reads the
#: value from the environment variable the parameter names.
_KAFKA_OPTIONS: dict[str, tuple[str, type | str]] = {
    "group": ("group_id", str),
    "layout": ("layout", str),
    "partitions": ("partitions", int),
    "session_timeout": ("session_timeout_s", float),
    "command_timeout": ("command_timeout_s", float),
    "commit_linger": ("commit_linger_s", float),
    "replication_factor": ("replication_factor", int),
    "min_insync_replicas": ("min_insync_replicas", int),
    "security_protocol": ("security_protocol", str),
    "sasl_mechanism": ("sasl_mechanism", str),
    "sasl_username": ("sasl_username", str),
    "sasl_password_env": ("sasl_password", "env"),
    "ssl_cafile": ("ssl_cafile", str),
    "ssl_certfile": ("ssl_certfile", str),
    "ssl_keyfile": ("ssl_keyfile", str),
    "ssl_key_password_env": ("ssl_key_password", "env"),
}


def _kafka_options(url: str, query: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    shown = redact_url(url)
    for key, values in parse_qs(query, keep_blank_values=True).items():
        if key not in _KAFKA_OPTIONS:
            raise ConfigError(
                f"bad log URL {shown!r}: unknown parameter {key!r}; a kafka:// URL takes "
                f"{sorted(_KAFKA_OPTIONS)}"
            )
        field_name, kind = _KAFKA_OPTIONS[key]
        value = values[-1]
        if kind == "env":
            if value not in os.environ:
                raise ConfigError(
                    f"bad log URL {shown!r}: {key}={value} names an environment variable "
                    f"that is not set; export {value} with the password"
                )
            options[field_name] = os.environ[value]
            continue
        assert isinstance(kind, type)
        try:
            options[field_name] = kind(value)
        except ValueError:
            raise ConfigError(
                f"bad log URL {shown!r}: {shown_param(key, value)} is not a {kind.__name__}"
            ) from None
    return options
