"""A queue's rate reads the runs admitted within its period from an index
(issue 24 gaps, item 3): its cost follows the period's admissions, not every
run of the queue's workflows (which an admission read page by page before)."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

from agentlog.eventlog.events import Event, RunAdmitted, RunCompleted, RunStarted, utcnow
from agentlog.eventlog.sqlite import SqliteEventLog


def _queued(run_id: str) -> Event:
    limits = {"queue": {"name": "emails", "priority": 0}}
    return Event(run_id, 1, RunStarted("mail", "1", {}, "sync", "fp", limits=limits))


async def test_admitted_since_reads_the_index_of_admissions(tmp_path: Path) -> None:
    path = tmp_path / "agentlog.db"
    now = utcnow()
    async with SqliteEventLog(path) as log:
        for n in range(6):
            run = f"r{n}"
            await log.append([_queued(run)])
            if n < 4:  # admitted an hour ago (r0, r1) or now (r2, r3)
                at = now - timedelta(hours=1) if n < 2 else now
                await log.append([Event(run, 2, RunAdmitted("emails"), ts=at)])
        await log.append([Event("r0", 3, RunCompleted())])
        await log.append([Event("other", 1, RunStarted("other", "1", {}, "sync", "fp"))])
        since = now - timedelta(minutes=1)
        assert await log.admitted_since(["mail"], since) == {"r2", "r3"}
        assert await log.admitted_since(["mail"], now - timedelta(hours=2)) == {
            "r0",
            "r1",
            "r2",
            "r3",
        }
        assert await log.admitted_since(["other"], since) == frozenset()
        assert await log.admitted_since([], since) == frozenset()
    with sqlite3.connect(path) as conn:
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT run_id FROM runs WHERE admitted_at > ? "
            "AND workflow IN (?, ?)",
            (0, "mail", "other"),
        ).fetchall()
    assert any("runs_by_admitted" in str(row[-1]) for row in plan), plan
