"""Connecting to PostgreSQL: the URL, retries with backoff, error mapping, migrations.

A server that is down or restarting is retried with backoff until
``connect_timeout`` seconds have passed, then reported as a retryable
:class:`~agentlog.errors.BackendUnavailableError` naming ``host:port``. A
server that answers and refuses (wrong password, unknown role or database,
no ``pg_hba.conf`` entry) is :class:`~agentlog.errors.PostgresAuthError` at
once: retrying cannot help until the URL changes. Passwords never appear in
a message (:func:`~agentlog.eventlog._redaction.redact_url`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit

import psycopg
import psycopg_pool

from agentlog._logging import get_logger
from agentlog.errors import BackendUnavailableError, ConfigError, PostgresAuthError
from agentlog.eventlog._redaction import redact_url, shown_param
from agentlog.eventlog.postgres._schema import MIGRATIONS

__all__ = [
    "PostgresTarget",
    "connect",
    "is_transient",
    "migrate",
    "unavailable",
    "with_retries",
]

_log = get_logger(__name__)
_T = TypeVar("_T")

# Server refusals that come and go: it is starting, stopping or recovering,
# or it has no free connection slot. Anything else the server answers at
# connect time (authentication, role, database, pg_hba) stays until the URL changes.
_TRANSIENT_REFUSALS = (
    "starting up",
    "shutting down",
    "in recovery",
    "too many clients",
    "remaining connection slots",
    "terminating connection",
)
# SQLSTATE classes of a connection lost or a server going away mid-call:
# 08 connection exception, 57P0x admin/crash shutdown and cannot connect now,
# 40001/40P01 serialization failure and deadlock (the call may simply be retried).
_TRANSIENT_STATES = ("08", "57P01", "57P02", "57P03", "40001", "40P01", "53300")
#: Our own URL parameters; any other query parameter goes to libpq (sslmode, ...).
_OPTIONS = {"connect_timeout": float, "pool_size": int}


@dataclass(frozen=True)
class PostgresTarget:
    """Where and how to connect, from a ``postgresql://`` URL."""

    conninfo: str
    """The URL for libpq, without agentlog's own parameters."""
    shown: str
    """The URL with its password masked, for messages."""
    host_port: str
    connect_timeout: float = 15.0
    """Seconds a connect (or a call whose connection was lost) keeps retrying."""
    pool_size: int = 10
    """At most this many pooled connections (plus one per :meth:`tail`)."""

    @classmethod
    def from_url(cls, url: str) -> PostgresTarget:
        """Parse ``postgresql://user:pass@host:port/db[?connect_timeout=S&pool_size=N]``.

        Raises:
            ConfigError: not a postgresql:// URL, or a bad agentlog parameter.
        """
        shown = redact_url(url)
        parts = urlsplit(url)
        if parts.scheme not in ("postgresql", "postgres") or not parts.hostname:
            raise ConfigError(
                f"bad log URL {shown!r}: write postgresql://user:password@host:port/database, "
                "for example postgresql://agentlog:secret@127.0.0.1:5432/agentlog"
            )
        options: dict[str, float | int] = {}
        rest: list[tuple[str, str]] = []
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if key not in _OPTIONS:
                rest.append((key, value))
                continue
            try:
                options[key] = _OPTIONS[key](value)
            except ValueError:
                raise ConfigError(
                    f"bad log URL {shown!r}: {shown_param(key, value)} is not a "
                    f"{_OPTIONS[key].__name__}"
                ) from None
            if options[key] <= 0:
                raise ConfigError(f"bad log URL {shown!r}: {key} must be positive")
        port = parts.port or 5432
        return cls(
            conninfo=parts._replace(scheme="postgresql", query=urlencode(rest)).geturl(),
            shown=shown,
            host_port=f"{parts.hostname}:{port}",
            connect_timeout=float(options.get("connect_timeout", 15.0)),
            pool_size=int(options.get("pool_size", 10)),
        )


def is_transient(exc: BaseException) -> bool:
    """True if the same call may succeed once the server is back (lost connection,
    restart, shutdown, no free slot, serialization failure)."""
    if isinstance(exc, psycopg_pool.PoolTimeout):
        return True
    if not isinstance(exc, psycopg.Error):
        return False
    state = exc.sqlstate
    if state is not None:
        return state.startswith(_TRANSIENT_STATES)
    if not isinstance(exc, psycopg.OperationalError):
        return False
    text = str(exc)
    # At connect time libpq reports the server's refusal as "FATAL: ...".
    return "FATAL:" not in text or any(mark in text for mark in _TRANSIENT_REFUSALS)


def unavailable(target: PostgresTarget, exc: BaseException, doing: str) -> BackendUnavailableError:
    """The typed error for a failed call: PostgresAuthError for a refusal that
    retrying cannot fix, else BackendUnavailableError (retryable if transient)."""
    reason = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, psycopg.OperationalError) and not is_transient(exc):
        return PostgresAuthError(
            f"postgresql log {target.shown}: {doing}: the server at {target.host_port} refused "
            f"the connection: {reason}. Check the user, password and database in the URL "
            "(and pg_hba.conf on the server); retrying will not help until they change."
        )
    error = BackendUnavailableError(
        f"postgresql log {target.shown}: {doing}: {reason}. Check that PostgreSQL runs and "
        f"listens on {target.host_port} (pg_isready -h {target.host_port.rsplit(':', 1)[0]} "
        f"-p {target.host_port.rsplit(':', 1)[1]}); nothing recorded was lost."
    )
    error.retryable = is_transient(exc)
    return error


async def with_retries(target: PostgresTarget, call: Callable[[], Awaitable[_T]], doing: str) -> _T:
    """``await call()``, again with backoff while it fails transiently, for at
    most ``target.connect_timeout`` seconds.

    ``call`` must be safe to repeat: a call whose commit was lost with its
    connection may have committed (the append checks for its own rows).

    Raises:
        BackendUnavailableError: still failing at the deadline, or not transient.
        Whatever ``call`` raises that is not a driver error.
    """
    deadline = time.monotonic() + target.connect_timeout
    delay = 0.05
    attempt = 0
    while True:
        try:
            return await call()
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            attempt += 1
            if not is_transient(exc) or time.monotonic() + delay > deadline:
                raise unavailable(target, exc, doing) from exc
            _log.info(
                "postgres_retry", where=target.host_port, attempt=attempt, error=str(exc)[:200]
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)


async def connect(
    target: PostgresTarget, *, doing: str
) -> psycopg.AsyncConnection[tuple[Any, ...]]:
    """One autocommit connection with ``synchronous_commit = on``, retried with
    backoff while the server is down (see :func:`with_retries`)."""

    async def attempt() -> psycopg.AsyncConnection[tuple[Any, ...]]:
        conn = await psycopg.AsyncConnection.connect(
            target.conninfo, autocommit=True, connect_timeout=max(2, int(target.connect_timeout))
        )
        await configure(conn)
        return conn

    return await with_retries(target, attempt, doing)


async def configure(conn: psycopg.AsyncConnection[tuple[Any, ...]]) -> None:
    """Every connection's settings: a commit returns once its WAL is flushed."""
    await conn.execute("SET synchronous_commit = on")


def pool(
    target: PostgresTarget,
) -> psycopg_pool.AsyncConnectionPool[psycopg.AsyncConnection[tuple[Any, ...]]]:
    """A pool of autocommit connections set up by :func:`configure` (not opened yet)."""
    return psycopg_pool.AsyncConnectionPool(
        target.conninfo,
        kwargs={"autocommit": True, "connect_timeout": max(2, int(target.connect_timeout))},
        min_size=1,
        max_size=target.pool_size,
        open=False,
        configure=configure,
        timeout=target.connect_timeout,
        reconnect_timeout=max(60.0, target.connect_timeout),
        name=f"agentlog {target.host_port}",
    )


async def migrate(conn: psycopg.AsyncConnection[tuple[Any, ...]], target: PostgresTarget) -> None:
    """Bring the database's agentlog tables up to :data:`MIGRATIONS`, in one transaction.

    An advisory lock makes processes opening the same database at once apply
    the migrations one after the other (the later ones find nothing to do).

    Raises:
        BackendUnavailableError: the schema is newer than this agentlog knows
            (not retryable: upgrade agentlog), or the server failed.
    """
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('agentlog_schema'))")
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS agentlog_schema_version (version integer NOT NULL)"
        )
        row = await (
            await conn.execute("SELECT max(version) FROM agentlog_schema_version")
        ).fetchone()
        version = int(row[0]) if row and row[0] is not None else 0
        if version > len(MIGRATIONS):
            error = BackendUnavailableError(
                f"postgresql log {target.shown} has agentlog schema version {version}, newer "
                f"than this agentlog knows ({len(MIGRATIONS)}): upgrade agentlog to open it."
            )
            error.retryable = False
            raise error
        for statements in MIGRATIONS[version:]:
            for statement in statements:
                await conn.execute(statement.encode())
        if version < len(MIGRATIONS):
            await conn.execute("DELETE FROM agentlog_schema_version")
            await conn.execute(
                "INSERT INTO agentlog_schema_version (version) VALUES (%s)", (len(MIGRATIONS),)
            )
            _log.info("postgres_migrated", where=target.host_port, to=len(MIGRATIONS), frm=version)
