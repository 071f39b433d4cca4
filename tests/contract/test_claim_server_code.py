"""The SQL and Lua generated from the claim and lease table, run in the real servers
with a ``now`` of the test's, over every example (those at the exact end of a lease
too, which a backend's API cannot set up: it reads its own clock)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
import pytest
import redis.asyncio as aioredis

from agentlog.errors import EventLogError, LeaseHeldError, UnknownRunError
from agentlog.eventlog._base import RunInfo, lease_expiry
from agentlog.eventlog._claim_cases import epoch_error
from agentlog.eventlog._row_format import info_from_row, info_to_row, to_us
from agentlog.eventlog.postgres import PostgresEventLog
from agentlog.eventlog.postgres._schema import CLAIM, LEASE, RUN_FIELDS, SELECT_RUN, UPSERT_RUN
from agentlog.eventlog.redis._rows import info_from_hash
from agentlog.eventlog.redis._schema import CLAIM as LUA_CLAIM
from agentlog.eventlog.redis._schema import LEASE as LUA_LEASE
from agentlog.testing._claim_examples import EXAMPLES, ClaimExample
from tests.services.redis_server import RedisServer

NOW = lease_expiry(0)
assert NOW is not None
#: The examples a server's claim or lease code decides (appends are Python's).
SERVER_EXAMPLES = [example for example in EXAMPLES if example.call != "append"]


def _asked(example: ClaimExample) -> str | None:
    """The lease end the call asks for, as the servers store it."""
    seconds = None if example.call == "release" else example.lease_asked
    expires = lease_expiry(seconds, NOW)
    return None if expires is None else str(to_us(expires))


def _check(
    example: ClaimExample, refused: bool, before: RunInfo | None, after: RunInfo | None
) -> None:
    """The server granted or refused as the example says, and a refusal changed nothing."""
    expected = example.error
    if not refused:
        assert expected is None, example
        assert after is not None and after.writer_epoch == example.then_epoch, (example, after)
        asked = _asked(example)
        assert (
            None if after.lease_expires_at is None else str(to_us(after.lease_expires_at))
        ) == asked
        return
    # What a backend raises for the refusal (the claim's one case; a lease's two).
    if example.call == "claim":
        raised: type[EventLogError] = LeaseHeldError
    elif before is None:
        raised = UnknownRunError
    else:
        raised = type(epoch_error("r", example.ask, before.writer_epoch))
    assert raised is expected, example
    assert after == before, example


async def test_the_generated_sql_decides_every_example(postgres_url: str) -> None:
    async with await PostgresEventLog.connect(postgres_url):
        pass  # creates the tables
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        for n, example in enumerate(SERVER_EXAMPLES):
            run_id = f"case-{n}"
            before = example.row(run_id, NOW)
            if before is not None:
                await conn.execute(UPSERT_RUN, info_to_row(before))
            asked = _asked(example)
            if example.call == "claim":
                fresh = RunInfo(run_id, writer_epoch=1, lease_owner="claimer")
                params: dict[str, Any] = dict(zip(RUN_FIELDS, info_to_row(fresh), strict=True))
                lease = None if asked is None else int(asked)
                params |= {"lease_expires_at": lease, "force": example.force, "now": to_us(NOW)}
                refused = await (await conn.execute(CLAIM, params)).fetchone() is None
            else:
                lease = None if asked is None else int(asked)
                cur = await conn.execute(
                    LEASE, {"expires": lease, "run": run_id, "epoch": example.ask}
                )
                refused = cur.rowcount == 0
            row = await (await conn.execute(SELECT_RUN, (run_id,))).fetchone()
            _check(example, refused, before, None if row is None else info_from_row(row))


def _hash(info: RunInfo) -> Mapping[str, str]:
    fields = {
        "run_id": info.run_id,
        "writer_epoch": str(info.writer_epoch),
        "lease_owner": info.lease_owner,
    }
    if info.lease_expires_at is not None:
        fields["lease_expires_at"] = str(to_us(info.lease_expires_at))
    return fields


@pytest.mark.redis
async def test_the_generated_lua_decides_every_example(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    client = aioredis.Redis(
        host=redis_server.host, port=redis_server.port, password=redis_server.password
    )
    try:
        for n, example in enumerate(SERVER_EXAMPLES):
            run_id = f"case-{n}"
            key = f"{redis_prefix}:run:{run_id}"
            before = example.row(run_id, NOW)
            if before is not None:
                await client.hset(key, mapping=dict(_hash(before)))
            asked = _asked(example) or ""
            if example.call == "claim":
                force = "1" if example.force else "0"
                args = [run_id, "claimer", asked, force, to_us(NOW), redis_prefix]
                reply = await client.eval(LUA_CLAIM, 1, key, *args)
            else:
                args = [example.ask, asked, redis_prefix, run_id]
                reply = await client.eval(LUA_LEASE, 1, key, *args)
            raw = await client.hgetall(key)
            after = info_from_hash(run_id, raw) if raw else None
            _check(example, reply[0] != b"ok", before, after)
    finally:
        await client.aclose()
