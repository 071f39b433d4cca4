"""The run list's counts per status come from ``run_counts`` (issue 23, item 11).

At a million runs, counting every run's status for each page of the UI or
``agentlog runs`` took longer the bigger the log grew (30x at 100,000 runs
against 1,000 in ``benchmarks/bench_scale.py``). SQLite now keeps the counts in
a table that triggers on ``runs`` update in the same transaction. These tests
check that the table always says what a count of the runs says, through
every way a run row changes, that a file from before the table gets it filled
when it is opened, and that an unfiltered page reads it.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

from agentlog.eventlog._run_pages import RunQuery
from agentlog.eventlog.events import (
    Event,
    InterruptRaised,
    ResumeReceived,
    RunAdmitted,
    RunCompleted,
    RunFailed,
    RunStarted,
    utcnow,
)
from agentlog.eventlog.sqlite import SqliteEventLog


def _scan(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT status, count(*) FROM runs WHERE last_seq > 0 GROUP BY status"
        ).fetchall()
    return dict(rows)


def _started(run_id: str, workflow: str = "wf") -> Event:
    return Event(run_id, 1, RunStarted(workflow, "1", {}, "sync", "fp"))


async def _fill(log: SqliteEventLog) -> None:
    """Runs in every status, moved through the paths that change a run row."""
    for i in range(12):
        await log.append([_started(f"r{i}", ("a", "b")[i % 2])])
    for i in range(0, 12, 3):  # completed
        await log.append([Event(f"r{i}", 2, RunCompleted())])
    await log.append([Event("r1", 2, RunFailed("boom"))])
    due = utcnow() + timedelta(hours=1)
    for i in (2, 4, 5):  # waiting, on a timer or an answer
        await log.append([Event(f"r{i}", 2, InterruptRaised("s", 0, 0, 0, None, due_at=due))])
    await log.append([Event("r5", 3, ResumeReceived({"x": 1}))])  # waiting -> running
    await log.claim_writer("r7", owner="me", lease_seconds=30)  # the claim's upsert
    await log.prune("r0")  # a tombstone keeps its row


async def test_the_counts_table_agrees_with_a_count_of_the_runs(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    log = SqliteEventLog(path)
    try:
        await _fill(log)
        page = await log.page_runs(RunQuery())
        filtered = await log.page_runs(RunQuery(workflow="a"))
    finally:
        await log.close()
    scanned = _scan(path)
    assert set(scanned) >= {"running", "waiting", "completed", "failed"}
    assert page.counts == scanned
    assert page.total == sum(scanned.values())
    assert sum(filtered.counts.values()) == 6  # a filtered page still counts its runs


async def test_an_unfiltered_page_reads_the_counts_table(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    log = SqliteEventLog(path)
    try:
        await _fill(log)
        with sqlite3.connect(path) as conn:  # what only the counts table says
            conn.execute("UPDATE run_counts SET n = 1000 WHERE status = 'completed'")
        page = await log.page_runs(RunQuery())
        waiting = await log.page_runs(RunQuery(status="waiting"))
    finally:
        await log.close()
    assert page.counts["completed"] == 1000
    assert waiting.counts["completed"] == 1000
    assert waiting.total == _scan(path)["waiting"]


async def _filled_file(tmp_path: Path) -> Path:
    """A closed log file holding the runs of ``_fill``."""
    path = tmp_path / "old.db"
    log = SqliteEventLog(path)
    try:
        await _fill(log)
    finally:
        await log.close()
    return path


def _undo_migration_7(conn: sqlite3.Connection) -> None:
    """Drop the queue columns that migration 7 added to ``runs``, and what
    migrations 8 to 10 added after it (the mailbox tables, indexes)."""
    for table in ("run_messages", "run_mailboxes"):
        conn.execute(f"DROP TABLE {table}")
    conn.execute("DROP INDEX runs_by_admitted")  # migration 9
    for index in ("runs_queued_by_rank", "runs_held_by_lease"):  # migration 10
        conn.execute(f"DROP INDEX {index}")
    for column in ("queue", "priority", "admitted_at"):
        conn.execute(f"ALTER TABLE runs DROP COLUMN {column}")


async def test_a_file_from_before_the_table_gets_it_filled(tmp_path: Path) -> None:
    path = await _filled_file(tmp_path)
    with sqlite3.connect(path) as conn:  # back to the schema before migration 6
        _undo_migration_7(conn)
        for name in ("insert", "delete", "update"):
            conn.execute(f"DROP TRIGGER runs_counted_{name}")
        conn.execute("DROP TABLE run_counts")
        conn.execute("PRAGMA user_version = 5")
    log = SqliteEventLog(path)
    try:
        page = await log.page_runs(RunQuery())
        await log.append([Event("r8", 2, RunCompleted())])
        after = await log.page_runs(RunQuery())
    finally:
        await log.close()
    scanned = _scan(path)
    assert after.counts == scanned
    assert page.counts["completed"] == scanned["completed"] - 1


def _queued(run_id: str, priority: int) -> Event:
    queue = {"queue": {"name": "emails", "priority": priority}}
    return Event(run_id, 1, RunStarted("mail", "1", {}, "sync", "fp", limits=queue))


async def test_queued_runs_are_counted_and_a_file_from_before_migration_7_opens(
    tmp_path: Path,
) -> None:
    """``queued`` (a run its queue has not admitted yet) is a status like any
    other for run_counts, and a file without the queue columns gets them."""
    path = await _filled_file(tmp_path)
    with sqlite3.connect(path) as conn:  # back to the schema of migration 6
        _undo_migration_7(conn)
        conn.execute("PRAGMA user_version = 6")
    log = SqliteEventLog(path)
    try:
        old = await log.get_run("r3")
        assert (old.queue, old.priority, old.admitted_at) == ("", 0, None)
        await log.append([_queued("q1", 2)])
        await log.append([_queued("q2", 0)])
        queued = await log.page_runs(RunQuery(status="queued"))
        info = await log.get_run("q1")
        assert (info.status, info.queue, info.priority, info.admitted_at) == (
            "queued",
            "emails",
            2,
            None,
        )
        await log.append([Event("q1", 2, RunAdmitted("emails"))])
        admitted = await log.get_run("q1")
        after = await log.page_runs(RunQuery())
    finally:
        await log.close()
    assert sorted(r.run_id for r in queued.rows) == ["q1", "q2"]
    assert admitted.status == "running" and admitted.admitted_at is not None
    assert after.counts == _scan(path) and after.counts["queued"] == 1
