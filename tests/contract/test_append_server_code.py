"""The append's fence and seq check, written once (issue 22): every case against
the Python, PostgreSQL's one-statement append and the Redis append script.

:data:`~agentlog.eventlog._claim_cases.APPEND_CHECKS` is read by
:func:`~agentlog.eventlog._fencing.check_next` and rendered into the SQL and the
Lua. Each example below says by hand what an append of one event must get
from a run's row; the servers' code is run on rows set up directly, so a
case a backend's API cannot reach (an epoch never claimed, a seq far ahead)
is checked too.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
import pytest
import redis.asyncio as aioredis

from agentlog.errors import ConflictError, EventLogError, FencedError
from agentlog.eventlog._base import RunInfo, check_next
from agentlog.eventlog._claim_cases import (
    APPEND_CHECKS,
    lua_append_refusals,
    sql_append_grant,
)
from agentlog.eventlog._row_format import event_row, info_from_row, info_to_row
from agentlog.eventlog.postgres import PostgresEventLog
from agentlog.eventlog.postgres._append import append_unlocked
from agentlog.eventlog.postgres._schema import SELECT_RUN, UPDATE_RUN_IF, UPSERT_RUN
from agentlog.eventlog.redis._rows import event_args, time_arg
from agentlog.eventlog.redis._schema import APPEND, Keys
from agentlog.testing import ev
from tests.services.redis_server import RedisServer


@dataclass(frozen=True)
class AppendExample:
    """An append of one event at ``first`` under ``epoch``, on a run at ``last``
    and ``current``; ``error`` is the exact type it deserves (None: written)."""

    last: int
    current: int
    epoch: int
    first: int
    error: type[EventLogError] | None


def _expected(last: int, current: int, epoch: int, first: int) -> type[EventLogError] | None:
    if epoch < current:
        return FencedError  # fenced, whatever the seq: a fenced writer must stop
    if epoch > current:
        return EventLogError  # an epoch never claimed: the caller's bug
    return None if first == last + 1 else ConflictError


EXAMPLES = tuple(
    AppendExample(last, current, epoch, first, _expected(last, current, epoch, first))
    for current in (0, 1, 2)
    for last in (0, 3)
    for epoch in sorted({max(0, current - 1), current, current + 1})
    for first in (max(1, last), last + 1, last + 2)
)


def _raised(example: AppendExample) -> type[EventLogError] | None:
    try:
        check_next("r", example.last, example.first, example.epoch, example.current)
    except EventLogError as exc:
        return type(exc)
    return None


def test_the_examples_cover_every_check_and_the_write() -> None:
    assert {e.error for e in EXAMPLES} == {None, FencedError, EventLogError, ConflictError}
    assert [check.name for check in APPEND_CHECKS] == [
        "another epoch than the run's",
        "not the run's next seq",
    ]


@pytest.mark.parametrize("example", EXAMPLES, ids=str)
def test_python_decides_every_example(example: AppendExample) -> None:
    assert _raised(example) is example.error


def test_the_server_code_is_generated_from_the_checks() -> None:
    assert f"WHERE run_id = %(run)s AND {sql_append_grant()}" in UPDATE_RUN_IF
    assert lua_append_refusals("{'refused', row_last, tonumber(row_epoch)}") in APPEND


def _row(run_id: str, example: AppendExample) -> RunInfo:
    return RunInfo(run_id, workflow="wf", last_seq=example.last, writer_epoch=example.current)


@pytest.mark.postgres
async def test_the_generated_sql_decides_every_example(postgres_url: str) -> None:
    async with await PostgresEventLog.connect(postgres_url):
        pass  # creates the tables
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        for n, example in enumerate(EXAMPLES):
            run_id = f"append-{n}"
            before = _row(run_id, example)
            await conn.execute(UPSERT_RUN, info_to_row(before))
            events = [ev(run_id, example.first, epoch=example.epoch)]
            rows = [event_row(events[0], example.epoch, None)]
            # The process believes the row is where the batch expects it: the
            # server's statement alone decides.
            known = RunInfo(run_id, last_seq=example.first - 1, writer_epoch=example.epoch)
            written = await append_unlocked(conn, known, events, rows, durable=True)
            after = await (await conn.execute(SELECT_RUN, (run_id,))).fetchone()
            assert after is not None
            now = info_from_row(after)
            if example.error is None:
                assert written is not None, example
                assert (now.last_seq, now.writer_epoch) == (example.first, example.current)
            else:
                assert written is None, example
                assert now == before, example


@pytest.mark.redis
async def test_the_generated_lua_decides_every_example(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    client = aioredis.Redis(
        host=redis_server.host, port=redis_server.port, password=redis_server.password
    )
    keys = Keys(redis_prefix)
    try:
        for n, example in enumerate(EXAMPLES):
            run_id = f"append-{n}"
            hash_key = keys.run(run_id)
            fields = {"run_id": run_id, "last_seq": str(example.last)}
            if example.current:  # a run never claimed has no writer_epoch field
                fields["writer_epoch"] = str(example.current)
            await client.hset(hash_key, mapping=fields)
            event = ev(run_id, example.first, epoch=example.epoch)
            row = event_row(event, example.epoch, None)
            script_keys = [hash_key, keys.events(run_id), keys.runs, keys.status("running")]
            script_keys += [keys.status("running"), keys.wake, keys.order]
            script_keys += [keys.order_in("running"), keys.order_in("running")]
            args = [run_id, example.epoch, example.first, 1, example.last, "wf", "1", "running"]
            args += [example.first, 0, "", time_arg(event.ts), "", "", 0, "", redis_prefix]
            args += event_args(row)
            reply = await client.eval(APPEND, len(script_keys), *script_keys, *args)
            if example.error is None:
                assert reply == [b"ok"], example
                continue
            assert reply[0] == b"refused", (example, reply)
            assert (int(reply[1]), int(reply[2])) == (example.last, example.current), example
            with pytest.raises(EventLogError) as raised:
                check_next(run_id, int(reply[1]), example.first, example.epoch, int(reply[2]))
            assert type(raised.value) is example.error, example
            stored = {k.encode(): v.encode() for k, v in fields.items()}
            assert await client.hgetall(hash_key) == stored, example
    finally:
        await client.aclose()
