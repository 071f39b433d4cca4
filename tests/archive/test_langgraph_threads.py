"""LangGraph threads in the archive: the checkpoints and checkpoint_writes views."""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

from langgraph.types import Command

from agentlog.archive import Archiver, ArchiverConfig, LocalArchiveStore, open_sql
from agentlog.archive._retention import RetentionPolicies, parse_policy
from agentlog.eventlog.events import LANGGRAPH_WORKFLOW, utcnow
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.langgraph import AgentlogSaver
from tests.support.lg_threads import approval_graph, run_thread


async def test_every_checkpoint_and_write_of_a_thread_is_a_row(tmp_path: Path) -> None:
    db = tmp_path / "hot.db"
    ids = run_thread(db, "t-done", answer=True)
    run_thread(db, "t-parked", answer=False)
    log = SqliteEventLog(db)
    try:
        sql = await open_sql(log=log)
        rows = sql.sql(
            "SELECT checkpoint_id, parent_id, step, removed FROM checkpoints "
            "WHERE thread_id = 't-done' ORDER BY seq"
        ).fetchall()
        assert sorted(r[0] for r in rows) == sorted(ids)
        assert [r[2] for r in rows] == sorted(r[2] for r in rows)  # steps in log order
        assert all(r[1] == prev[0] for prev, r in pairwise(rows))  # a chain
        assert not any(r[3] for r in rows)
        parked = sql.sql(
            "SELECT thread_id, count(*) FROM checkpoint_writes "
            "WHERE channel = '__interrupt__' GROUP BY thread_id ORDER BY thread_id"
        ).fetchall()
        assert [p[0] for p in parked] == ["t-done", "t-parked"]
        sql.close()
    finally:
        await log.close()


async def test_an_idle_thread_is_archived_and_stays_hot_for_its_saver(tmp_path: Path) -> None:
    db = tmp_path / "hot.db"
    ids = run_thread(db, "idle", answer=False)
    later = utcnow() + timedelta(days=30)
    log = SqliteEventLog(db)
    store = LocalArchiveStore(tmp_path / "archive")
    try:
        first = await Archiver(log, store).run(now=later)
        assert first.run_ids == ("idle",) and first.pruned == 0
        before = (await log.get_run("idle")).last_seq
        assert [e.seq async for e in log.read("idle")][-1] == before  # all still hot
    finally:
        await log.close()
    # The saver continues the thread where it was parked, as if never archived.
    config: Any = {"configurable": {"thread_id": "idle"}}
    with AgentlogSaver.from_url(f"sqlite:///{db}") as saver:
        latest = saver.get_tuple(config)
        assert latest is not None and latest.config["configurable"]["checkpoint_id"] == ids[0]
        done = approval_graph(saver).invoke(Command(resume="yes"), config)
        every = [t.config["configurable"]["checkpoint_id"] for t in saver.list(config)]
    assert done["notes"] == ["planned", "approved:yes"]
    log = SqliteEventLog(db)
    try:
        second = await Archiver(log, store).run(now=later)
        assert second.run_ids == ("idle",) and second.events > 0  # the new events only
        sql = await open_sql(store, log)
        rows = sql.sql("SELECT count(*), count(DISTINCT checkpoint_id) FROM checkpoints")
        total, distinct = rows.fetchall()[0]
        assert total == distinct == len(every) > len(ids)  # nothing counted twice
        sql.close()
    finally:
        await log.close()


async def test_a_parked_threads_archive_never_expires_a_finished_ones_does(
    tmp_path: Path,
) -> None:
    db = tmp_path / "hot.db"
    run_thread(db, "parked", answer=False)
    run_thread(db, "answered", answer=True)
    policies = RetentionPolicies(per_workflow=dict([parse_policy(f"{LANGGRAPH_WORKFLOW}=ttl:1d")]))
    log = SqliteEventLog(db)
    store = LocalArchiveStore(tmp_path / "archive")
    try:
        now = utcnow() + timedelta(days=10)
        await Archiver(log, store, ArchiverConfig(policies)).run(run_ids=["parked"], now=now)
        await Archiver(log, store, ArchiverConfig(policies)).run(run_ids=["answered"], now=now)
        summary = await Archiver(log, store, ArchiverConfig(policies)).run(
            now=now + timedelta(days=5)
        )
        assert summary.expired_files == 1
        sql = await open_sql(store, None)
        left = sql.sql("SELECT DISTINCT thread_id FROM checkpoints").fetchall()
        assert left == [("parked",)]
        sql.close()
        assert (await log.get_run("answered")).last_seq > 0  # the hot thread is untouched
    finally:
        await log.close()


async def test_a_deleted_thread_shows_as_removed_and_archives(tmp_path: Path) -> None:
    db = tmp_path / "hot.db"
    run_thread(db, "gone", answer=True)
    with AgentlogSaver.from_url(f"sqlite:///{db}") as saver:
        saver.delete_thread("gone")
    log = SqliteEventLog(db)
    store = LocalArchiveStore(tmp_path / "archive")
    try:
        sql = await open_sql(log=log)
        removed = sql.sql("SELECT DISTINCT removed FROM checkpoints").fetchall()
        assert removed == [(True,)]
        sql.close()
        await Archiver(log, store).run(now=utcnow() + timedelta(days=30))
        sql = await open_sql(store, log)
        assert sql.archived_files == 1
        count = sql.sql("SELECT count(*) FROM checkpoints WHERE thread_id = 'gone'").fetchall()
        assert count[0][0] >= 3
        sql.close()
    finally:
        await log.close()
