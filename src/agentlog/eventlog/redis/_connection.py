"""Connecting to Redis: the URL, the retry on open, and the durability checks.

Redis's durability is "an ops setting, not a code setting" (the pattern
article's failure mode 03): the same client code loses every event on a
restart if the server keeps nothing on disk. So :func:`connect` reads the
server's settings before anything is written and refuses what would lose or
drop acknowledged events:

* no persistence at all (``appendonly no`` and ``save ""``): refused unless
  the URL says ``allow_volatile=true``;
* ``maxmemory-policy`` other than ``noeviction``: refused always, because
  the server could evict a run's index or events to make room;
* ``durable=True`` writes (appends, claims, prunes) need each write on disk
  before its reply: ``appendonly yes`` with ``appendfsync always``, or a
  ``WAITAOF 1 0`` after the write on Redis >= 7.2 (with AOF on). A server
  with neither opens, but a durable write raises :class:`RedisDurabilityError`
  before anything is written, unless ``allow_volatile=true``.

Driver errors are translated here (:func:`translating`): an unreachable
server is a retryable BackendUnavailableError naming host:port, a refused
password a :class:`RedisAuthError`, which is not retryable.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qs, unquote, urlsplit

import redis.asyncio as aioredis
from redis import exceptions as rex
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from agentlog._logging import get_logger
from agentlog.errors import BackendUnavailableError, ConfigError
from agentlog.eventlog._redaction import shown_param

__all__ = [
    "Durability",
    "RedisAuthError",
    "RedisConfig",
    "RedisDurabilityError",
    "connect",
    "durability_error",
    "redis_config",
    "translating",
]

_log = get_logger(__name__)
_POOL_SIZE = 64  # connections per log; tails blocked in XREAD hold one each
_POOL_TIMEOUT = 60.0  # seconds a call waits for a free connection

#: How the server makes a ``durable=True`` write durable: it fsyncs every
#: write before replying ("fsync"), we ask it to with WAITAOF ("waitaof"), or
#: it cannot and the URL accepted that ("volatile"), or it cannot ("none").
Durability = Literal["fsync", "waitaof", "volatile", "none"]


class RedisAuthError(BackendUnavailableError):
    """The Redis server refused our password (or user): retrying will not help."""

    retryable = False


class RedisDurabilityError(ConfigError):
    """The Redis server's settings could lose or evict acknowledged events.

    Attributes:
        setting: the server setting at fault, such as ``maxmemory-policy``.
    """

    def __init__(self, where: str, setting: str, why: str, fix: str) -> None:
        self.setting = setting
        super().__init__(f"Redis at {where}: {why}. {fix}; nothing was written.")


@dataclass(frozen=True, slots=True)
class RedisConfig:
    """Where the Redis log lives and how to reach it (from a ``redis://`` URL)."""

    host: str = "127.0.0.1"
    """The server's host name or address."""
    port: int = 6379
    """The server's port."""
    db: int = 0
    """The logical database number (the URL's path)."""
    username: str | None = None
    """The ACL user (``user:password@``); None is the default user."""
    password: str | None = None
    """The password (``:password@``); None when the server has none."""
    prefix: str = "agentlog"
    """Every key of this log starts with ``PREFIX:``, so logs can share a database."""
    allow_volatile: bool = False
    """Open a server without persistence, and accept ``durable=True`` writes
    that are only acknowledged, not on disk: a restart can lose them."""
    connect_attempts: int = 5
    """How many times opening tries to reach the server, with doubling waits."""
    keep_snapshots: int = 3
    """How many of each run's newest snapshots to keep."""

    @property
    def where(self) -> str:
        """``host:port/db``, for messages (never the password)."""
        return f"{self.host}:{self.port}/{self.db}"


_TRUE, _FALSE = ("1", "true", "yes"), ("0", "false", "no")


def redis_config(url: str, shown: str, *, keep_snapshots: int = 3) -> RedisConfig:
    """The :class:`RedisConfig` of ``redis://[user][:password@]host:port/db?options``.

    Args:
        shown: the URL with its password masked, for messages.

    Raises:
        ConfigError: the URL's shape or a parameter is wrong.
    """
    parts = urlsplit(url)
    db_text = parts.path.strip("/") or "0"
    if parts.scheme != "redis" or not parts.hostname or not db_text.isdigit():
        raise ConfigError(
            f"bad log URL {shown!r}: write redis://[:password@]host:port/db, for example "
            "redis://127.0.0.1:6379/0"
        )
    options: dict[str, Any] = {}
    for key, values in parse_qs(parts.query, keep_blank_values=True).items():
        value = values[-1]
        if key == "prefix" and value and ":" not in value:
            options["prefix"] = value
        elif key == "allow_volatile" and value.lower() in _TRUE + _FALSE:
            options["allow_volatile"] = value.lower() in _TRUE
        elif key == "connect_attempts" and value.isdigit() and int(value) > 0:
            options["connect_attempts"] = int(value)
        else:
            raise ConfigError(
                f"bad log URL {shown!r}: parameter {shown_param(key, value)} is not one of "
                "prefix=NAME "
                "(no ':'), allow_volatile=true|false, connect_attempts=N (N >= 1)"
            )
    try:
        port = parts.port or 6379
    except ValueError:
        raise ConfigError(f"bad log URL {shown!r}: the port is not a number") from None
    return RedisConfig(
        host=parts.hostname,
        port=port,
        db=int(db_text),
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password is not None else None,
        keep_snapshots=keep_snapshots,
        **options,
    )


@contextlib.contextmanager
def translating(config: RedisConfig, doing: str) -> Iterator[None]:
    """Map redis-py's errors to agentlog's, naming the server and what failed."""
    try:
        yield
    except (rex.AuthenticationError, rex.AuthenticationWrongNumberOfArgsError) as exc:
        raise _auth_error(config, exc) from exc
    except rex.ResponseError as exc:
        if str(exc).startswith(("NOAUTH", "WRONGPASS", "NOPERM")):
            raise _auth_error(config, exc) from exc
        raise BackendUnavailableError(
            f"Redis at {config.where}: {doing}: the server answered {exc}"
        ) from exc
    except (rex.ConnectionError, rex.TimeoutError, OSError) as exc:
        raise BackendUnavailableError(
            f"Redis at {config.where} is unreachable ({doing}): {exc}. Start the server or "
            "fix the URL; retry once it answers"
        ) from exc


def _auth_error(config: RedisConfig, exc: Exception) -> RedisAuthError:
    return RedisAuthError(
        f"Redis at {config.where} refused the credentials ({exc}). Put the server's password "
        "in the URL as redis://:PASSWORD@host:port/db (or user:PASSWORD@ for an ACL user); "
        "retrying will not help until it is right"
    )


async def connect(config: RedisConfig) -> tuple[aioredis.Redis, Durability, str]:
    """Open a client, reach the server (with backoff) and check its settings.

    Returns:
        The client, how durable writes are made durable, and the server version.

    Raises:
        BackendUnavailableError: the server did not answer after
            ``connect_attempts`` tries (it names host:port).
        RedisAuthError: the server refused the password.
        RedisDurabilityError: no persistence (without ``allow_volatile``), or
            a ``maxmemory-policy`` that evicts keys.
    """
    # A blocking pool: more concurrent calls than connections wait for one
    # (bounded by pool_timeout) instead of failing with "Too many connections".
    pool = aioredis.BlockingConnectionPool(
        host=config.host,
        port=config.port,
        db=config.db,
        username=config.username,
        password=config.password,
        socket_connect_timeout=5.0,
        # No silent resend: an append whose reply was lost is reported as such
        # (BackendUnavailableError), never sent twice behind the caller's back.
        retry=Retry(NoBackoff(), 0),
        max_connections=_POOL_SIZE,
        timeout=_POOL_TIMEOUT,
    )
    client = aioredis.Redis.from_pool(pool)  # the client owns the pool: aclose() closes it
    try:
        settings, version = await _reach(client, config)
        durability = _check(config, settings, version)
    except BaseException:
        await client.aclose()
        raise
    _log.info("redis_opened", where=config.where, version=version, durability=durability)
    return client, durability, version


async def _reach(client: aioredis.Redis, config: RedisConfig) -> tuple[dict[str, str], str]:
    wait, started = 0.1, time.monotonic()
    for attempt in range(1, config.connect_attempts + 1):
        try:
            with translating(config, "opening the log"):
                raw = await client.config_get("*")
                info = await client.info("server")
                return _text(raw), str(info.get("redis_version", "0"))
        except RedisAuthError:
            raise
        except BackendUnavailableError as exc:
            if attempt == config.connect_attempts:
                raise BackendUnavailableError(
                    f"Redis at {config.where} did not answer after {attempt} attempts over "
                    f"{time.monotonic() - started:.1f} s: {exc.__cause__}. Start the server "
                    "(or fix the host and port in the URL), then open the log again"
                ) from exc
            _log.warning("redis_unreachable", where=config.where, attempt=attempt)
            await asyncio.sleep(wait)
            wait *= 2
    raise AssertionError("unreachable")


def _text(raw: dict[Any, Any]) -> dict[str, str]:
    return {
        (k.decode() if isinstance(k, bytes) else str(k)): (
            v.decode() if isinstance(v, bytes) else str(v)
        )
        for k, v in raw.items()
    }


def _version(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:3] if p.isdigit())


def _check(config: RedisConfig, settings: dict[str, str], version: str) -> Durability:
    """Refuse settings that lose or evict events; say how durable writes are made durable."""
    aof = settings.get("appendonly") == "yes"
    rdb = bool(settings.get("save", "").strip())
    policy = settings.get("maxmemory-policy", "")
    if policy != "noeviction":
        raise RedisDurabilityError(
            config.where,
            "maxmemory-policy",
            f"maxmemory-policy is {policy!r}, so when memory runs short the server evicts keys "
            "and a run's events or index would silently disappear",
            "Set maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction, and in "
            "redis.conf); writes then fail loudly when memory is full",
        )
    if not aof and not rdb and not config.allow_volatile:
        raise RedisDurabilityError(
            config.where,
            "appendonly",
            'the server has no persistence (appendonly no, save ""), so a restart loses '
            "every recorded event: Redis's durability is a server setting, not a client one",
            "Set appendonly yes and appendfsync always (CONFIG SET appendonly yes; CONFIG SET "
            "appendfsync always; and in redis.conf), or add allow_volatile=true to the URL to "
            "accept losing every run on a restart",
        )
    if aof and settings.get("appendfsync") == "always":
        return "fsync"
    if aof and _version(version) >= (7, 2):
        return "waitaof"
    return "volatile" if config.allow_volatile else "none"


def durability_error(config: RedisConfig, version: str) -> RedisDurabilityError:
    """The refusal of a ``durable=True`` write on a server that cannot make it durable."""
    return RedisDurabilityError(
        config.where,
        "appendfsync",
        f"a durable write needs the server to fsync it before replying, and this server "
        f"(Redis {version}) neither has appendonly yes with appendfsync always nor supports "
        "WAITAOF (Redis >= 7.2 with appendonly yes)",
        "Set appendonly yes and appendfsync always, or run Redis >= 7.2 with appendonly yes; "
        "or write with durable=False (async durability); or add allow_volatile=true to the URL "
        "to accept acknowledged writes that a crash can lose",
    )
