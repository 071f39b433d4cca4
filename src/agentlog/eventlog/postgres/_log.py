"""The PostgreSQL backend: events, run index, claims and snapshots in one database.

Driver: psycopg 3 (``psycopg[binary]`` and ``psycopg_pool``), not asyncpg.
psycopg ships type hints (``mypy --strict`` checks our calls into it), has a
maintained async connection pool, async LISTEN/NOTIFY (``notifies()``), and
passes ``bytes`` as binary parameters; asyncpg has none of the type hints and
its own pool would be the only gain.

Tables and SQL are in :mod:`agentlog.eventlog.postgres._schema`; connecting,
retries and migrations in :mod:`agentlog.eventlog.postgres._connection`.

How the contract is kept:

* **Conditional append and fencing in one transaction.** An append is ONE
  statement (:data:`~agentlog.eventlog.postgres._schema.APPEND_FAST`): it
  updates the run's index row only where ``last_seq`` and ``writer_epoch``
  are the ones the batch expects, and inserts the events only if that
  update happened. The update holds the row's lock until the commit, so a
  claim (which bumps the epoch under the same lock) is ordered before or
  after it, never in between. The new index values come from the run's row
  as this instance last saw it. A run with no row yet takes its first batch
  at epoch 0 in one statement too (``APPEND_NEW``: the row and the events,
  or nothing if a row exists). When the row is not as seen, or the condition
  fails, the slow path locks the row ``FOR UPDATE``, says which error the
  append deserves (conflict, fenced, unclaimed epoch), or appends.
* **Sync durability** is a committed transaction on a connection with
  ``synchronous_commit = on`` (the commit returns after its WAL is flushed);
  ``durable=False`` commits with ``synchronous_commit = off``.
* **A lost connection** (the server restarting) is retried with backoff for
  ``connect_timeout`` seconds. An append whose commit was lost with its
  connection may have committed: its retry finds its own rows (same seqs,
  same checksums) and returns, so it is neither lost nor doubled.
* **Workers** find runs with :meth:`PostgresEventLog.runnable`, ``FOR UPDATE
  SKIP LOCKED``: a run that another worker is claiming at that moment is
  passed over instead of waited for; the claim itself is one fenced upsert.
* **tail** listens on the ``agentlog_events`` channel (a trigger notifies
  every commit of events), and polls as well in case a notification is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

import psycopg
import psycopg_pool

from agentlog._logging import get_logger
from agentlog.crypto import PayloadCipher
from agentlog.errors import BackendUnavailableError, UnknownRunError
from agentlog.eventlog._base import (
    Capabilities,
    RunInfo,
    Snapshot,
    check_batch,
    check_lease,
    check_next,
    check_run_id,
    snapshots_kept_from,
)
from agentlog.eventlog._mailbox import ended_statuses_sql
from agentlog.eventlog._row_format import (
    MAX_SEQ,
    event_rows,
    from_us,
    info_from_row,
    info_to_row,
    seq_param,
    to_us,
)
from agentlog.eventlog._sql_index import SqlDialect, SqlIndexedEventLog, Statement
from agentlog.eventlog._tail import TailWake
from agentlog.eventlog.events import Event, utcnow
from agentlog.eventlog.postgres import _connection as pgconn
from agentlog.eventlog.postgres._append import append_locked, append_unlocked, event_arrays
from agentlog.eventlog.postgres._mailbox import PostgresMailbox
from agentlog.eventlog.postgres._schema import (
    CHANNEL,
    CLAIM,
    LEASE,
    NEXT_WAKE,
    READ_EVENTS,
    RUN_FIELDS,
    RUNNABLE,
    SELECT_RUN,
)

__all__ = ["PostgresEventLog"]

_log = get_logger(__name__)
_T = TypeVar("_T")
_Conn = psycopg.AsyncConnection[tuple[Any, ...]]
_KNOWN_RUNS = 10_000  # index rows remembered for the one-statement append
_GETCONN_WAIT = 2.0  # seconds a call waits for a pooled connection before it retries
_LISTEN_POLL = 5.0  # at least this long between reads of a tail that listens (a lost notify)


class _ListenWake(TailWake):
    """A tail's wait on its own LISTEN connection (polling without one)."""

    waits_for_start = True

    def __init__(self, listener: _Conn | None, poll_seconds: float, where: str) -> None:
        super().__init__(poll_seconds)
        self._listener, self._where = listener, where

    async def wait(self, armed: object, after_seq: int) -> None:
        listener = self._listener
        if listener is None or listener.closed:
            await asyncio.sleep(self.poll_seconds)
            return
        try:
            # Woken by any commit of events; the timeout only covers a lost notify.
            wait = max(self.poll_seconds, _LISTEN_POLL)
            async for _ in listener.notifies(timeout=wait, stop_after=1):
                pass
        except psycopg.Error:
            _log.info("postgres_listen_lost", where=self._where)
            await listener.close()

    async def close(self) -> None:
        if self._listener is not None:
            await self._listener.close()


class PostgresEventLog(PostgresMailbox, SqlIndexedEventLog):
    """Events, run index, writer claims and snapshots in a PostgreSQL database.

    Open it with :meth:`connect` (or ``open_log("postgresql://...")``): it
    connects, creates or migrates the tables and opens the pool.

    Args:
        target: where to connect (:class:`~agentlog.eventlog.postgres._connection.PostgresTarget`).
        keep_snapshots: how many of each run's newest snapshots to keep.
        cipher: seal payload content and snapshots with per-run data keys;
            None stores them in clear.
        read_batch: events fetched per round trip while reading.
    """

    capabilities = Capabilities(live_tail=True)  # a tail wakes on LISTEN/NOTIFY
    _dialect = SqlDialect(
        "agentlog_runs",
        param=lambda name: f"%({name})s",
        contains="strpos({col}, {arg}) > 0",
        collate=' COLLATE "C"',
    )

    def __init__(
        self,
        target: pgconn.PostgresTarget,
        *,
        keep_snapshots: int = 3,
        cipher: PayloadCipher | None = None,
        read_batch: int = 1000,
    ) -> None:
        self.target = target
        self.url = target.shown
        self.keep_snapshots = keep_snapshots
        self.cipher = cipher
        self.read_batch = read_batch
        self._pool = pgconn.pool(target)
        self._known: dict[str, RunInfo] = {}
        self._closed = False
        self._server_lost = False
        self._closing: set[asyncio.Future[None]] = set()

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        keep_snapshots: int = 3,
        cipher: PayloadCipher | None = None,
    ) -> PostgresEventLog:
        """Open the log at ``url``, creating or migrating its tables.

        Raises:
            ConfigError: the URL is malformed.
            PostgresAuthError: the server refused the user, password or database.
            BackendUnavailableError: the server stayed unreachable for
                ``connect_timeout`` seconds, or its schema is newer than this agentlog.
        """
        target = pgconn.PostgresTarget.from_url(url)
        conn = await pgconn.connect(target, doing="cannot connect")
        try:
            await pgconn.with_retries(
                target, lambda: pgconn.migrate(conn, target), "cannot create the schema"
            )
        finally:
            await conn.close()
        log = cls(target, keep_snapshots=keep_snapshots, cipher=cipher)
        await log._pool.open(wait=False)
        _log.debug("postgres_log_opened", where=target.host_port)
        return log

    # -- plumbing -------------------------------------------------------------------

    async def _call(self, body: Callable[[_Conn], Awaitable[_T]], doing: str) -> _T:
        """``body`` on a pooled connection, retried while the server is away."""
        if self._closed:
            raise BackendUnavailableError(
                f"postgresql log {self.url} is closed; open it again with open_log()."
            )

        async def attempt() -> _T:
            pool = self._pool
            try:
                async with pool.connection(timeout=_GETCONN_WAIT) as conn:
                    result = await body(conn)
            except psycopg.OperationalError as exc:
                if pgconn.is_transient(exc):
                    await self._renew_pool(
                        pool
                    )  # the server went away: so did its other connections
                raise
            except psycopg_pool.PoolTimeout:
                if self._server_lost:
                    await self._renew_pool(pool)  # still not back: connect again at once
                raise
            self._server_lost = False
            return result

        return await pgconn.with_retries(self.target, attempt, doing)

    async def _renew_pool(self, broken: psycopg_pool.AsyncConnectionPool[Any]) -> None:
        """Replace a pool whose server went away by a new one, which connects at
        once (the old pool would wait out its growing reconnect backoff)."""
        self._server_lost = True
        if self._pool is not broken or self._closed:
            return  # another call replaced it already
        fresh = pgconn.pool(self.target)
        await fresh.open(wait=False)
        if self._pool is not broken or self._closed:
            await fresh.close()
            return
        self._pool = fresh
        # Connections still out finish their call; the old pool closes them on return.
        task = asyncio.ensure_future(broken.close(timeout=_GETCONN_WAIT))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _rows(self, sql: str, params: Sequence[Any] | dict[str, Any]) -> list[Any]:
        async def body(conn: _Conn) -> list[Any]:
            return await (await conn.execute(sql, params)).fetchall()

        return await self._call(body, "read failed")

    def _remember(self, info: RunInfo) -> None:
        if len(self._known) >= _KNOWN_RUNS and info.run_id not in self._known:
            self._known.pop(next(iter(self._known)))
        self._known[info.run_id] = info

    # -- events -----------------------------------------------------------------------

    async def append(self, events: Sequence[Event], *, durable: bool = True) -> None:
        run_id, _first, epoch = check_batch(events)
        # Encode before any round trip: a bad payload fails with nothing written.
        rows = event_rows(events, epoch, self.cipher)
        attempts = 0

        async def body(conn: _Conn) -> RunInfo:
            nonlocal attempts
            attempts += 1
            new = await append_unlocked(conn, self._known.get(run_id), events, rows, durable)
            if new is not None:
                return new
            arrays = event_arrays(rows)
            return await append_locked(conn, events, arrays, durable, retried=attempts > 1)

        new = await self._call(body, "append failed")
        self._remember(new)

    async def _stored_seq(self, run_id: str, *, newest: bool) -> int | None:
        sql = f"SELECT {'max' if newest else 'min'}(seq) FROM agentlog_events WHERE run_id = %s"
        stored = (await self._rows(sql, (run_id,)))[0][0]
        return None if stored is None else int(stored)

    async def _event_rows(self, run_id: str, after: int, last: int, limit: int) -> list[Any]:
        return await self._rows(READ_EVENTS, (run_id, after, last, limit))

    async def _tail_wake(self, run_id: str, poll_seconds: float) -> TailWake:
        return _ListenWake(await self._listen(), poll_seconds, self.target.host_port)

    async def _listen(self) -> _Conn | None:
        """A connection of its own that LISTENs for appends; None: poll instead."""
        try:
            conn = await pgconn.connect(self.target, doing="cannot listen")
            await conn.execute(f"LISTEN {CHANNEL}")
        except (psycopg.Error, BackendUnavailableError) as exc:
            _log.info("postgres_listen_failed", where=self.target.host_port, error=str(exc))
            return None
        return conn

    # -- the run index ------------------------------------------------------------------

    async def find_run(self, run_id: str) -> RunInfo | None:
        check_run_id(run_id)
        rows = await self._rows(SELECT_RUN, (run_id,))
        return info_from_row(rows[0]) if rows else None

    async def _select(self, *statements: Statement) -> list[list[Any]]:
        return [await self._rows(sql, dict(params)) for sql, params in statements]

    async def runnable(self, *, now: datetime | None = None, limit: int = 1000) -> list[RunInfo]:
        at = to_us(now or utcnow())
        rows = await self._rows(RUNNABLE, {"now": at, "limit": limit})
        return [info_from_row(row) for row in rows]

    async def next_wake(self) -> datetime | None:
        rows = await self._rows(NEXT_WAKE, ())
        return from_us(rows[0][0]) if rows and rows[0][0] is not None else None

    # -- writers --------------------------------------------------------------------------

    async def claim_writer(
        self,
        run_id: str,
        *,
        owner: str = "",
        lease_seconds: float | None = None,
        force: bool = True,
    ) -> int:
        check_run_id(run_id)

        async def body(conn: _Conn) -> RunInfo | None:
            now = utcnow()
            expires = None if lease_seconds is None else now + timedelta(seconds=lease_seconds)
            fresh = RunInfo(run_id, writer_epoch=1, lease_owner=owner, lease_expires_at=expires)
            params = dict(zip(RUN_FIELDS, info_to_row(fresh), strict=True))
            params |= {"force": force, "now": to_us(now)}
            row = await (await conn.execute(CLAIM, params)).fetchone()
            if row is not None:
                return info_from_row(row)
            held = await (await conn.execute(SELECT_RUN, (run_id,))).fetchone()
            if held is not None:
                check_lease(info_from_row(held))
            return None  # the lease ran out in between: claim again

        info = None
        while info is None:
            info = await self._call(body, "claim failed")
        self._remember(info)
        _log.info("writer_claimed", run_id=run_id, epoch=info.writer_epoch, owner=owner)
        return info.writer_epoch

    async def _lease_update(self, run_id: str, epoch: int, expires: datetime | None) -> None:
        check_run_id(run_id)

        async def body(conn: _Conn) -> None:
            at = None if expires is None else to_us(expires)
            cur = await conn.execute(LEASE, {"expires": at, "run": run_id, "epoch": epoch})
            if cur.rowcount == 1:
                return
            row = await (
                await conn.execute(
                    "SELECT writer_epoch FROM agentlog_runs WHERE run_id = %s", (run_id,)
                )
            ).fetchone()
            if row is None:
                raise UnknownRunError(run_id, self.url)
            check_next(run_id, 0, 1, epoch, row[0])

        await self._call(body, "lease update failed")

    async def renew_lease(self, run_id: str, epoch: int, lease_seconds: float) -> None:
        await self._lease_update(run_id, epoch, utcnow() + timedelta(seconds=lease_seconds))

    async def release_lease(self, run_id: str, epoch: int) -> None:
        await self._lease_update(run_id, epoch, None)

    # -- snapshots ------------------------------------------------------------------------

    async def save_snapshot(self, snapshot: Snapshot) -> None:
        check_run_id(snapshot.run_id)
        snapshot = self._sealed_snapshot(snapshot)
        created = to_us(snapshot.created_at, "created_at")
        row = (snapshot.run_id, snapshot.seq, snapshot.state, created, snapshot.base_seq)

        async def body(conn: _Conn) -> None:
            async with conn.transaction():
                # A snapshot can always be rebuilt from the events: no WAL flush wait.
                await conn.execute("SET LOCAL synchronous_commit = off")
                await conn.execute(
                    "INSERT INTO agentlog_snapshots (run_id, seq, state, created_at, base_seq) "
                    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (run_id, seq) DO UPDATE SET "
                    "state = EXCLUDED.state, created_at = EXCLUDED.created_at, "
                    "base_seq = EXCLUDED.base_seq",
                    row,
                )
                await self._drop_old_snapshots(conn, snapshot.run_id, self.keep_snapshots)

        await self._call(body, "snapshot save failed")

    async def load_snapshot(
        self, run_id: str, *, at_or_before: int | None = None
    ) -> Snapshot | None:
        check_run_id(run_id)
        upto = MAX_SEQ if at_or_before is None else seq_param(at_or_before)
        rows = await self._rows(
            "SELECT seq, state, created_at, base_seq FROM agentlog_snapshots WHERE run_id = %s "
            "AND seq <= %s ORDER BY seq DESC LIMIT 1",
            (run_id, upto),
        )
        if not rows:
            return None
        seq, state, created, base_seq = rows[0]
        return self._opened_snapshot(
            Snapshot(run_id, seq, bytes(state), from_us(created), base_seq)
        )

    @staticmethod
    async def _drop_old_snapshots(conn: _Conn, run_id: str, keep: int) -> None:
        """Delete the run's snapshots below what :func:`snapshots_kept_from` keeps."""
        cur = await conn.execute(
            "SELECT seq, base_seq FROM agentlog_snapshots WHERE run_id = %s", (run_id,)
        )
        floor = snapshots_kept_from(await cur.fetchall(), keep)
        await conn.execute(
            "DELETE FROM agentlog_snapshots WHERE run_id = %s AND seq < %s", (run_id, floor)
        )

    # -- retention ------------------------------------------------------------------------

    async def prune_many(
        self, run_ids: Sequence[str], *, keep_latest_snapshot: bool = False
    ) -> None:
        """Prune the runs in one transaction: one commit for them all."""
        ids = self._distinct_run_ids(run_ids)

        async def body(conn: _Conn) -> None:
            async with conn.transaction():
                tables = ["agentlog_events"]
                if keep_latest_snapshot:
                    for run_id in ids:
                        await self._drop_old_snapshots(conn, run_id, 1)
                else:
                    tables.append("agentlog_snapshots")
                for table in tables:
                    await conn.execute(f"DELETE FROM {table} WHERE run_id = ANY(%s)", (ids,))
                # An unfinished run's unmoved messages stay for its next writer,
                # and its unreported ones for the next send of their keys.
                ended = (
                    "(SELECT status FROM agentlog_runs r WHERE r.run_id = m.run_id) "
                    f"IN ({ended_statuses_sql()})"
                )
                await conn.execute(
                    "DELETE FROM agentlog_run_messages m WHERE run_id = ANY(%s) "
                    f"AND ((moved AND reported) OR {ended})",
                    (ids,),
                )
                await conn.execute(
                    f"DELETE FROM agentlog_run_mailboxes m WHERE run_id = ANY(%s) AND {ended}",
                    (ids,),
                )
                # The rows stay as tombstones: the run ids stay taken.
                await conn.execute(
                    "UPDATE agentlog_runs SET archived = true WHERE run_id = ANY(%s)", (ids,)
                )

        if ids:
            await self._call(body, "prune failed")
        for run_id in ids:
            _log.info("run_pruned", run_id=run_id, kept_snapshot=keep_latest_snapshot)

    # -- lifecycle ------------------------------------------------------------------------

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.gather(*self._closing, return_exceptions=True)
        with contextlib.suppress(psycopg_pool.PoolTimeout, psycopg.Error):
            await self._pool.close()
