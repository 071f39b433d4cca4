"""The Redis log's order sets (redis_pages.py): kept by every append, and
built once for a log written before they existed."""

from __future__ import annotations

from typing import Any

import pytest

from agentlog.eventlog._base import EventLog
from agentlog.eventlog._run_pages import RunQuery, page_in_memory
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import InterruptRaised, ResumeReceived, RunCompleted
from agentlog.eventlog.redis import RedisEventLog
from agentlog.testing import ev, started

pytestmark = pytest.mark.redis

QUERIES = [
    RunQuery(limit=4),
    RunQuery(status="waiting", limit=10),
    RunQuery(status="completed", limit=10),
    RunQuery(offset=3, limit=3),
]


async def _same_as_the_rule(log: EventLog) -> None:
    every = await log.list_runs()
    for query in QUERIES:
        page = await log.page_runs(query)
        want = page_in_memory(every, query)
        assert (page.rows, page.total, page.counts) == (want.rows, want.total, want.counts)


async def _open(url: str) -> RedisEventLog:
    log = await open_log(url)
    assert isinstance(log, RedisEventLog)
    return log


async def test_a_log_written_before_the_order_sets_pages_after_building_them(
    redis_url: str, redis_prefix: str, raw: Any
) -> None:
    async with await _open(redis_url) as log:
        for i in range(8):
            await log.append([ev(f"r{i}", 1, started()), ev(f"r{i}", 2, RunCompleted())])
        await log.append(
            [ev("parked", 1, started()), ev("parked", 2, InterruptRaised("a", 1, 0, 0, "ok?"))]
        )
    # What an older agentlog leaves: the run hashes and sets, no order sets.
    order = await raw.keys(f"{redis_prefix}:order*")
    assert len(order) >= 3  # the order, per status, and the built mark
    await raw.delete(*order)

    async with await _open(redis_url) as log:
        await _same_as_the_rule(log)
        assert await raw.get(f"{redis_prefix}:order-built") == b"1"
        assert await raw.zcard(f"{redis_prefix}:order") == 9
        # Appends go on keeping them: a run moves between the status sets.
        await log.append([ev("parked", 3, ResumeReceived("yes"))])
        await _same_as_the_rule(log)
        await log.append([ev("parked", 4, RunCompleted())])
        await _same_as_the_rule(log)
        assert await raw.zscore(f"{redis_prefix}:order:waiting", "parked") is None
        assert await raw.zscore(f"{redis_prefix}:order:running", "parked") is None
