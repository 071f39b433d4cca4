"""The run list: paged, filtered and counted in the backends, hot and archived runs once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from agentlog.archive import Archiver, LocalArchiveStore
from agentlog.errors import ConfigError
from agentlog.eventlog import EventLog, RunInfo
from agentlog.eventlog._run_pages import RunQuery
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.eventlog.postgres import PostgresEventLog
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.replay import RunCatalog
from tests.support.replay_runs import T0, add_runs, run_events

N = 40


def expected(ids: list[tuple[str, int]], **filters: object) -> list[RunInfo]:
    """The runs a query should list, in order, worked out by hand from the events."""
    infos = [RunInfo(run_id).after(run_events(run_id, i)) for run_id, i in ids]
    status, workflow = filters.get("status"), filters.get("workflow")
    since, until, text = filters.get("since"), filters.get("until"), filters.get("text")
    chosen = [
        info
        for info in infos
        if (status is None or info.status == status)
        and (workflow is None or info.workflow == workflow)
        and (since is None or info.updated_at >= since)  # type: ignore[operator]
        and (until is None or info.updated_at < until)  # type: ignore[operator]
        and (text is None or str(text) in info.run_id)
    ]
    by_time: dict[object, list[RunInfo]] = {}
    for info in chosen:
        by_time.setdefault(info.updated_at, []).append(info)
    ordered = []
    for when in sorted(by_time, reverse=True):  # type: ignore[type-var]
        ordered.extend(sorted(by_time[when], key=lambda info: info.run_id))
    return ordered


QUERIES = [
    {},
    {"status": "completed"},
    {"status": "running"},
    {"workflow": "beta"},
    {"workflow": "beta", "status": "failed"},
    {"since": T0 + timedelta(minutes=5), "until": T0 + timedelta(minutes=12)},
    {"text": "run-1"},
    {"text": "nothing-like-this"},
]


@pytest.fixture(params=["memory", "sqlite"])
async def log(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[EventLog]:
    made: EventLog = (
        MemoryEventLog() if request.param == "memory" else SqliteEventLog(tmp_path / "hot.db")
    )
    async with made:
        yield made


def _ids(n: int, prefix: str = "run-") -> list[tuple[str, int]]:
    return [(f"{prefix}{i:03d}", i) for i in range(n)]


async def _check_paging(log: EventLog, ids: list[tuple[str, int]]) -> None:
    for filters in QUERIES:
        want = expected(ids, **filters)
        counts_filters = {k: v for k, v in filters.items() if k != "status"}
        want_counts: dict[str, int] = {}
        for info in expected(ids, **counts_filters):
            want_counts[info.status] = want_counts.get(info.status, 0) + 1
        for offset in (0, 7, len(want) - 1, len(want) + 3):
            page = await log.page_runs(RunQuery(**filters, offset=max(0, offset), limit=7))  # type: ignore[arg-type]
            assert [r.run_id for r in page.rows] == [
                r.run_id for r in want[max(0, offset) : max(0, offset) + 7]
            ], filters
            assert page.total == len(want), filters
            assert page.counts == want_counts, filters


async def test_page_runs_filters_orders_and_counts(log: EventLog) -> None:
    ids = _ids(N)
    await add_runs(log, ids)
    await _check_paging(log, ids)
    assert await log.list_workflows() == ["alpha", "beta", "gamma"]
    page = await log.page_runs(RunQuery(limit=0))
    assert page.rows == [] and page.total == N


async def test_page_runs_on_postgres(postgres_url: str) -> None:
    async with await PostgresEventLog.connect(postgres_url) as log:
        ids = _ids(N)
        await add_runs(log, ids)
        await _check_paging(log, ids)
        assert await log.list_workflows() == ["alpha", "beta", "gamma"]


async def test_bad_page_arguments_are_config_errors(tmp_path: Path) -> None:
    async with SqliteEventLog(tmp_path / "hot.db") as log:
        catalog = RunCatalog(log)
        with pytest.raises(ConfigError, match="offset"):
            await catalog.page(offset=-1)
        with pytest.raises(ConfigError, match="time zone"):
            await catalog.page(since=T0.replace(tzinfo=None))


async def _archive_finished(log: EventLog, store: LocalArchiveStore) -> int:
    summary = await Archiver(log, store).run(now=T0 + timedelta(hours=1))
    return summary.runs


async def test_a_pruned_run_is_listed_once_as_archived(tmp_path: Path) -> None:
    store = LocalArchiveStore(tmp_path / "archive")
    async with SqliteEventLog(tmp_path / "hot.db") as log:
        ids = _ids(20)
        await add_runs(log, ids)
        assert await _archive_finished(log, store) > 0
        assert all(i.archived for i in await log.list_runs() if i.status != "running")
        catalog = RunCatalog(log, store)
        page = await catalog.page(limit=100)
        assert sorted(r.run_id for r in page.rows) == sorted(r for r, _ in ids)  # once each
        assert page.total == 20
        where = {r.run_id: r.where for r in page.rows}
        for info in await log.list_runs():
            assert where[info.run_id] == ("archived" if info.archived else "hot")
        assert sorted(where.values()).count("hot") == sum(1 for _, i in ids if i % 3 == 0)
        done = await catalog.page(status="completed")
        assert done.rows and all(r.where == "archived" for r in done.rows)
        assert done.counts == page.counts
        assert page.to_json()["rows"][0]["updated_at"] == page.rows[0].updated_at.isoformat()  # type: ignore[union-attr]
        await catalog.close()


async def test_archive_only_runs_merge_into_the_hot_list_in_order(tmp_path: Path) -> None:
    """Runs the hot log has no row for (another hot log archived them) rank among
    the hot ones at every offset, filtered or not."""
    store = LocalArchiveStore(tmp_path / "archive")
    old = _ids(30, prefix="old-")
    async with SqliteEventLog(tmp_path / "old.db") as first:
        await add_runs(first, old)
        await _archive_finished(first, store)
        archived = [(r, i) for r, i in old if i % 3]  # the finished ones
    new = [(f"new-{i:03d}", i) for i in range(1, 50, 2)]
    async with SqliteEventLog(tmp_path / "new.db") as log:
        await add_runs(log, new)
        catalog = RunCatalog(log, store)
        both = archived + new
        for filters in ({}, {"workflow": "gamma"}, {"status": "completed"}, {"text": "-01"}):
            want = [r.run_id for r in expected(both, **filters)]
            page = await catalog.page(**filters, limit=1000)  # type: ignore[arg-type]
            assert [r.run_id for r in page.rows] == want, filters
            assert page.total == len(want)
            for offset in range(0, len(want) + 2, 3):
                got = await catalog.page(**filters, offset=offset, limit=4)  # type: ignore[arg-type]
                assert [r.run_id for r in got.rows] == want[offset : offset + 4], (filters, offset)
        where = {r.run_id: r.where for r in (await catalog.page(limit=1000)).rows}
        assert {where[r] for r, _ in archived} == {"archived"}
        assert {where[r] for r, _ in new} == {"hot"}
        assert await catalog.workflows() == ["alpha", "beta", "gamma"]
        await catalog.close()
    archive_alone = RunCatalog(None, store)
    page = await archive_alone.page(limit=1000)
    assert [r.run_id for r in page.rows] == [r.run_id for r in expected(archived)]
    await archive_alone.close()
