"""A queue's admission reads a few rows of the run index, whatever its backlog
(SQLite: rows of its statements; Redis: keys the server looked up)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Queue, Runtime, RuntimeConfig
from agentlog.runtime._queue_admission import admit, arrange
from tests.services.redis_server import RedisServer
from tests.support.queues import queued
from tests.support.runtime import Calls

QUEUE = Queue("emails", concurrency=5)


async def _admit_and_pass(log: Any, wf_name: str, backlog: int) -> None:
    """One admission (refused: better-ranked runs wait) and one worker pass
    (the five best-ranked runs: priority 0, oldest first)."""
    assert await admit(log, QUEUE, [wf_name], f"r{backlog - 1:05d}") is False
    taken = await arrange(log, [], {QUEUE.name: (QUEUE, [wf_name])}, {wf_name: QUEUE.name}, 50)
    assert [info.run_id for info in taken] == [f"r{n:05d}" for n in range(0, 15, 3)]


async def _reads(path: Path, backlog: int) -> tuple[int, list[str]]:
    """The rows that one admission and one worker pass read from the run
    index of a log with ``backlog`` queued runs (three priorities), and the
    query plan of each statement."""
    wf = queued(Calls(), asyncio.Event(), QUEUE)
    client = RuntimeConfig(owner="client", execute=False, worker=False)
    async with await Runtime.open(f"sqlite:///{path}", workflows=[wf], config=client) as rt:
        for n in range(backlog):
            await rt.submit(wf, run_id=f"r{n:05d}", input={"n": 0}, priority=n % 3)
        log = rt.log
        assert isinstance(log, SqliteEventLog)
        rows, statements = 0, list[tuple[str, Any]]()
        query = log._query

        def counted(sql: str, params: Any) -> list[Any]:
            nonlocal rows
            found = query(sql, params)
            rows += len(found)
            statements.append((sql, params))
            return found

        log._query = counted  # type: ignore[method-assign]
        await _admit_and_pass(log, wf.name, backlog)
        log._query = query  # type: ignore[method-assign]
        plans = [
            " ".join(str(row[-1]) for row in query(f"EXPLAIN QUERY PLAN {sql}", params))
            for sql, params in statements
        ]
    limited = all("LIMIT" in sql for sql, _ in statements if "ORDER BY" in sql)
    return rows, [*plans, f"limited: {limited}"]


async def test_an_admission_reads_the_same_rows_for_a_backlog_ten_times_larger(
    tmp_path: Path,
) -> None:
    small, small_plans = await _reads(tmp_path / "small.db", 30)
    large, large_plans = await _reads(tmp_path / "large.db", 300)
    assert small == large, f"an admission read {small} rows of 30 runs, {large} of 300"
    assert small_plans == large_plans
    assert large_plans.pop() == "limited: True", "a sorted read without a LIMIT"
    for plan in large_plans:  # a range of the lease index, the rank index's first entries
        assert "runs_held_by_lease" in plan or "runs_queued_by_rank" in plan, plan
        assert "TEMP B-TREE" not in plan, f"sorted outside an index: {plan}"


async def _lookups(server: RedisServer, prefix: str, backlog: int) -> int:
    """The keys the Redis server looked up for one admission and one worker
    pass on a log with ``backlog`` queued runs (three priorities)."""
    wf = queued(Calls(), asyncio.Event(), QUEUE)
    client = RuntimeConfig(owner="client", execute=False, worker=False)
    raw = aioredis.Redis(host=server.host, port=server.port)
    url = server.url(prefix=prefix)
    try:
        async with await Runtime.open(url, workflows=[wf], config=client) as rt:
            for n in range(backlog):
                await rt.submit(wf, run_id=f"r{n:05d}", input={"n": 0}, priority=n % 3)
            await _admit_and_pass(rt.log, wf.name, backlog)  # a log's first read may build its sets

            async def looked_up() -> int:
                stats = await raw.info("stats")
                return int(stats["keyspace_hits"]) + int(stats["keyspace_misses"])

            before = await looked_up()
            await _admit_and_pass(rt.log, wf.name, backlog)
            return await looked_up() - before  # INFO looks up no key
    finally:
        await raw.aclose()


@pytest.mark.redis
async def test_an_admission_on_redis_looks_up_the_same_keys_for_a_backlog_ten_times_larger(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    small = await _lookups(redis_server, f"{redis_prefix}s", 30)
    large = await _lookups(redis_server, f"{redis_prefix}l", 300)
    assert small == large, f"an admission looked up {small} keys of 30 runs, {large} of 300"
    assert small < 30, small
