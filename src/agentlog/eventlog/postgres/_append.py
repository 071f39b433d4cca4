"""The append of the PostgreSQL backend: one statement when it can, the run row's lock when not.

:func:`append_unlocked` is the common case, one round trip, in ONE statement
that is its own transaction: the conditional update of the run's index row
and the insert of the events
(:data:`~agentlog.eventlog.postgres._schema.APPEND_FAST`), or, for the first
batch of a run with no row yet at epoch 0 (a LangGraph thread's first save,
which claims nothing), the insert of the row and of the events
(:data:`~agentlog.eventlog.postgres._schema.APPEND_NEW`). :func:`append_locked`
is the rest: the run's row unknown to this process, or not as expected (a
conflict, a fence, another writer's append): it locks the row ``FOR
UPDATE``, raises the error the append deserves, or appends; after a commit
lost with its connection it finds the batch already stored and returns.

Where a sync append's time goes (one event, ~500 bytes, measured with
``benchmarks/bench_postgres.py``): the server's commit (WAL flush) first,
then the client's CPU. So one event goes as scalars (:data:`APPEND_ONE`),
not as eight one-element arrays, and the statements are prepared on first
use. A batch of :data:`COPY_FROM` or more goes by COPY. (Encoding the rows
while the COPY streams, to overlap this process's CPU with the server's,
measured no faster on a busy two-core machine, and is not done.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from agentlog.errors import ConflictError
from agentlog.eventlog._base import RunInfo, check_next
from agentlog.eventlog._row_format import info_from_row, info_to_row
from agentlog.eventlog.events import Event
from agentlog.eventlog.postgres._schema import (
    APPEND_FAST,
    APPEND_NEW,
    APPEND_ONE,
    COPY_EVENTS,
    COPY_FROM,
    COPY_TYPES,
    INSERT_EVENTS,
    LOCK_RUN,
    RUN_FIELDS,
    UPDATE_RUN_IF,
    UPSERT_RUN,
)

__all__ = ["after_values", "append_locked", "append_unlocked", "event_arrays"]

_Conn = psycopg.AsyncConnection[tuple[Any, ...]]
_ROW_COLUMNS = ("run_id", "seq", "type", "ts", "schema_v", "writer_epoch", "payload", "checksum")


def event_arrays(rows: Sequence[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """Event rows (of :func:`~agentlog.eventlog.sqlite._schema.event_row`) as the
    column arrays the SQL unnests."""
    return {name: [row[i] for row in rows] for i, name in enumerate(_ROW_COLUMNS)}


async def append_unlocked(
    conn: _Conn,
    known: RunInfo | None,
    events: Sequence[Event],
    rows: Sequence[tuple[Any, ...]],
    durable: bool,
) -> RunInfo | None:
    """The one-statement append, if the run's row is as this process knows it
    (``known``, at the seq before the batch) or absent (a new run's first batch
    at epoch 0); None if it is not (nothing was written then)."""
    first_seq, epoch = events[0].seq, events[0].writer_epoch
    if known is not None and known.last_seq == first_seq - 1:
        new = known.after(events)
        if await _append_fast(conn, new, first_seq, epoch, rows, durable):
            return new
    elif known is None and first_seq == 1 and epoch == 0 and len(rows) < COPY_FROM:
        new = RunInfo(events[0].run_id).after(events)
        row = zip(RUN_FIELDS, info_to_row(new), strict=True)
        params = {f"r_{name}": value for name, value in row}
        if await _execute_counted(conn, APPEND_NEW, params | event_arrays(rows), rows, durable):
            return new
    return None


async def _append_fast(
    conn: _Conn,
    new: RunInfo,
    first_seq: int,
    epoch: int,
    rows: Sequence[tuple[Any, ...]],
    durable: bool,
) -> bool:
    """The one-statement append of a known run; False if the run's row was not
    as expected (nothing was written then)."""
    params = dict(zip(("run", *_INFO_AFTER), after_values(new), strict=True))
    params |= {"expect_seq": first_seq - 1, "epoch": epoch}
    if len(rows) >= COPY_FROM:
        return await _append_copy(conn, params, rows, durable)
    if len(rows) == 1:
        params |= dict(zip(_ROW_COLUMNS, rows[0], strict=True))
        return await _execute_counted(conn, APPEND_ONE, params, rows, durable)
    return await _execute_counted(conn, APPEND_FAST, params | event_arrays(rows), rows, durable)


async def _execute_counted(
    conn: _Conn, sql: str, params: dict[str, Any], rows: Sequence[tuple[Any, ...]], durable: bool
) -> bool:
    """Run a one-statement append; True if it inserted every row."""
    try:
        if durable:
            # Prepared at once (not after psycopg's default five runs): one parse per connection.
            cur = await conn.execute(sql, params, prepare=True)
        else:
            async with conn.transaction():
                await conn.execute("SET LOCAL synchronous_commit = off")
                cur = await conn.execute(sql, params, prepare=True)
    except psycopg.errors.UniqueViolation:
        return False  # rolled back whole; the locked path says which seq conflicts
    return cur.rowcount == len(rows)


class _NotAsExpected(Exception):
    """The run's row was not as the batch expects: roll back, take the locked path."""


async def _append_copy(
    conn: _Conn, params: dict[str, Any], rows: Sequence[tuple[Any, ...]], durable: bool
) -> bool:
    """A big batch: the same conditional update, then the rows by binary COPY
    (no per-value escaping), in one transaction."""
    try:
        async with conn.transaction():
            if not durable:
                await conn.execute("SET LOCAL synchronous_commit = off")
            cur = await conn.execute(UPDATE_RUN_IF, params, prepare=True)
            if cur.rowcount != 1:
                raise _NotAsExpected
            async with conn.cursor().copy(COPY_EVENTS) as copy:
                copy.set_types(COPY_TYPES)
                for row in rows:
                    await copy.write_row(row)
    except _NotAsExpected:
        return False
    return True


async def append_locked(
    conn: _Conn,
    events: Sequence[Event],
    arrays: dict[str, list[Any]],
    durable: bool,
    *,
    retried: bool,
) -> RunInfo:
    """The append under the run row's lock, raising the error it deserves."""
    run_id, first_seq, epoch = events[0].run_id, events[0].seq, events[0].writer_epoch
    async with conn.transaction():
        if not durable:
            await conn.execute("SET LOCAL synchronous_commit = off")
        row = await (await conn.execute(LOCK_RUN, (run_id,))).fetchone()
        info = RunInfo(run_id) if row is None else info_from_row(row)
        if retried and await _already_written(conn, info, events, arrays):
            return info  # the lost commit had gone through
        check_next(run_id, info.last_seq, first_seq, epoch, info.writer_epoch)
        new = info.after(events)
        try:
            async with conn.transaction():  # a savepoint: the error leaves the tx usable
                await conn.execute(INSERT_EVENTS, arrays)
        except psycopg.errors.UniqueViolation as exc:
            # The index said the seq was free; the table disagrees.
            raise ConflictError(run_id, info.last_seq + 1, first_seq) from exc
        await conn.execute(UPSERT_RUN, info_to_row(new))
    return new


async def _already_written(
    conn: _Conn, info: RunInfo, events: Sequence[Event], arrays: dict[str, list[Any]]
) -> bool:
    """True if the batch is stored as it is (a retry after a lost commit)."""
    first, last = events[0].seq, events[-1].seq
    if info.last_seq < last or info.writer_epoch != events[0].writer_epoch:
        return False
    cur = await conn.execute(
        "SELECT checksum FROM agentlog_events WHERE run_id = %s AND seq BETWEEN %s AND %s "
        "ORDER BY seq",
        (info.run_id, first, last),
    )
    return [row[0] for row in await cur.fetchall()] == arrays["checksum"]


# The index columns an append changes (RunInfo.after), in APPEND_FAST's names.
_INFO_AFTER = (
    "workflow",
    "version",
    "status",
    "last_seq",
    "steps",
    "started_at",
    "updated_at",
    "wake_at",
    "queue",
    "priority",
    "admitted_at",
)


def after_values(info: RunInfo) -> list[Any]:
    """``run_id`` then the :data:`_INFO_AFTER` values of ``info``, as stored."""
    row = dict(zip(RUN_FIELDS, info_to_row(info), strict=True))
    return [info.run_id, *(row[name] for name in _INFO_AFTER)]
