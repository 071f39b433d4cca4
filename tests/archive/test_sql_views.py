"""The SQL views' plans: what a query over a view reads, pinned by its scans."""

from __future__ import annotations

import json
from typing import Any

from agentlog.archive import Archiver, LocalArchiveStore, open_sql
from agentlog.eventlog import Event, TaskStarted
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.archive.helpers import T0, record_run
from tests.support.archive import NOW


def _parquet_scans(plan: Any) -> list[str]:
    """The projected columns of each Parquet scan of a JSON query plan, as text."""
    if isinstance(plan, list):
        return [scan for node in plan for scan in _parquet_scans(node)]
    own = []
    if plan.get("name") == "READ_PARQUET":
        own = [json.dumps(plan.get("extra_info", {}).get("Projections", []))]
    return own + _parquet_scans(plan.get("children", []))


async def test_tasks_view_reads_the_tasks_tables_not_the_events(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    """The ``tasks`` view reads the archive's tasks tables, never its events
    files (issue 23: grouping every event made its p95 query 7.9 s at 10M
    events), and a run still hot merges in; it still says what grouping said."""
    await record_run(hot, "ok", tag=1, steps=3)
    await record_run(hot, "bad", end="failed", tag=2, steps=2)
    events = await record_run(hot, "open", end=None, tag=3, steps=1)
    pending = TaskStarted("k-open-late", "search", "late", 9, 0, 0)
    await hot.append([Event("open", len(events) + 1, pending, T0, events[0].writer_epoch)])
    await Archiver(hot, store).run(now=NOW, run_ids=["ok", "bad"])
    with await open_sql(store, hot) as db:  # "open" is still hot: both sources
        (_, plan), *_ = db.sql(
            "EXPLAIN (FORMAT JSON) SELECT name, quantile_cont(duration_ms, 0.95) FROM tasks "
            "GROUP BY name"
        ).fetchall()
        scans = _parquet_scans(json.loads(plan))
        assert scans and all("type" not in columns for columns in scans), plan
        rows = db.sql(
            "SELECT run_id, key, name, step, attempts, status, duration_ms, error FROM tasks "
            "ORDER BY run_id, started, key"
        ).fetchall()
    by_key = {row[1]: row for row in rows}
    assert by_key["k-1-1"] == (
        "ok",
        "k-1-1",
        "fetch",
        "step1",
        2,
        "completed",
        20.0,
        "TimeoutError: slow",
    )
    assert by_key["k-2-0"][2:7] == ("search", "step0", 1, "completed", 10.0)
    assert by_key["k-open-late"][4:7] == (1, "pending", None)  # started, no outcome yet
    assert {row[0] for row in rows} == {"ok", "bad", "open"}
