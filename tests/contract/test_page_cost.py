"""One page of the run list costs one page (issue 22 item 2).

Every backend that keeps a run index pages it in the backend: a counting
backend (the log with its run-row reads counted) shows that a page reads at
most its own rows, however many runs there are, and that the page is the one
the rule (:func:`~agentlog.eventlog._run_pages.page_in_memory` over every
run) gives, ties, time ranges and ranks included.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agentlog.eventlog import EventLog
from agentlog.eventlog._run_pages import RunQuery, page_in_memory
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import (
    Event,
    EventData,
    RunCompleted,
    RunFailed,
    RunStarted,
    StepCompleted,
)
from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog
from agentlog.eventlog.postgres import PostgresEventLog
from agentlog.eventlog.redis import RedisEventLog
from agentlog.eventlog.sqlite import SqliteEventLog

RUNS = 60
LIMIT = 5
T0 = datetime(2026, 1, 1, tzinfo=UTC)
STATUSES = 3  # running, completed, failed: the most count rows a page's counts read


def _events(run_id: str, i: int) -> list[Event]:
    """Run ``i``: every third still running, some failed; pairs share an update time."""
    data: list[EventData] = [
        RunStarted(("alpha", "beta")[i % 2], "1", {}, "sync", "fp", {}, ["s"]),
        StepCompleted("s", 0, 0, {"n": i}),
    ]
    if i % 3:
        data.append(RunFailed("boom") if i % 5 == 0 else RunCompleted())
    at = T0 + timedelta(minutes=i // 2)
    return [
        Event(run_id, seq, d, ts=at - timedelta(seconds=len(data) - seq))
        for seq, d in enumerate(data, 1)
    ]


class Counter:
    """Run rows read from the store since the last :meth:`take`."""

    def __init__(self) -> None:
        self.rows = 0

    def take(self) -> int:
        rows, self.rows = self.rows, 0
        return rows


def _count(target: Any, name: str, counter: Counter, size: Callable[[Any, Any], int]) -> None:
    """Wrap ``target.name`` so that each call adds ``size(args, result)`` rows."""
    inner = getattr(target, name)

    async def counted(*args: Any, **kwargs: Any) -> Any:
        result = await inner(*args, **kwargs)
        counter.rows += size(args, result)
        return result

    setattr(target, name, counted)


def _sql_rows(args: Any, result: Any) -> int:
    return sum(len(rows) for rows in result)


def _each(args: Any, result: Any) -> int:
    return len(args[0])


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("kafka", marks=pytest.mark.kafka),
    ]
)
async def counted(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """A log of ``RUNS`` runs whose run-row reads are counted from now on."""
    log: EventLog
    if request.param == "sqlite":
        log = SqliteEventLog(tmp_path / "log.db")
    elif request.param == "postgres":
        log = await PostgresEventLog.connect(request.getfixturevalue("postgres_url"))
    elif request.param == "redis":
        log = await open_log(request.getfixturevalue("redis_url"))
    else:
        config = KafkaConfig(
            bootstrap_servers=request.getfixturevalue("kafka_bootstrap"),
            name=request.getfixturevalue("kafka_name"),
            partitions=2,
        )
        log = await KafkaEventLog.connect(config)
    async with log:
        for i in range(RUNS):
            await log.append(_events(f"run-{i:03d}", i))
        counter = Counter()
        if isinstance(log, SqliteEventLog | PostgresEventLog):
            _count(log, "_select", counter, _sql_rows)  # the SQL a page runs, rows it returns
        elif isinstance(log, RedisEventLog):
            _count(log, "_rows_of", counter, _each)  # the run hashes a page reads
        else:
            assert isinstance(log, KafkaEventLog)
            _count(log._reader, "exact_many", counter, _each)  # runs read exactly
        yield log, counter


async def _check(log: EventLog, counter: Counter, query: RunQuery) -> None:
    page = await log.page_runs(query)
    read = counter.take()
    assert read <= query.limit + STATUSES, f"{query}: a page of {query.limit} read {read} rows"
    want = page_in_memory(await log.list_runs(), query)
    counter.take()
    assert [r.run_id for r in page.rows] == [r.run_id for r in want.rows], query
    assert page.rows == want.rows, query
    assert (page.total, page.counts) == (want.total, want.counts), query


async def test_one_page_reads_one_page(counted: tuple[EventLog, Counter]) -> None:
    log, counter = counted
    await _check(log, counter, RunQuery(limit=LIMIT))
    await _check(log, counter, RunQuery(offset=RUNS // 2, limit=LIMIT))
    await _check(log, counter, RunQuery(status="completed", offset=3, limit=LIMIT))
    await _check(log, counter, RunQuery(status="cancelled", limit=LIMIT))
    since, until = T0 + timedelta(minutes=5), T0 + timedelta(minutes=20)
    await _check(log, counter, RunQuery(since=since, until=until, offset=2, limit=LIMIT))
    await _check(log, counter, RunQuery(offset=RUNS + 3, limit=LIMIT))
    await _check(log, counter, RunQuery(limit=0))


async def test_a_rank_counts_the_runs_ahead_without_reading_them(
    counted: tuple[EventLog, Counter],
) -> None:
    log, counter = counted
    for i in (0, 7, 30, 31, RUNS - 1):
        info = await log.get_run(f"run-{i:03d}")
        counter.take()
        ahead = (info.updated_at, info.run_id)
        await _check(log, counter, RunQuery(before=ahead, limit=0))
        await _check(log, counter, RunQuery(status="failed", before=ahead, limit=LIMIT))
        since = T0 + timedelta(minutes=3)
        await _check(log, counter, RunQuery(since=since, before=ahead, offset=1, limit=LIMIT))
