"""The archiver against a real SQLite hot log and a local archive folder."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest

from agentlog.archive import (
    ArchivedEventReader,
    Archiver,
    ArchiverConfig,
    LocalArchiveStore,
    RetentionMode,
    RetentionPolicies,
    RetentionPolicy,
    RunNotArchivableError,
    open_sql,
)
from agentlog.archive._parquet import MANIFEST_PREFIX, Manifest
from agentlog.errors import RunArchivedError
from agentlog.eventlog import Event, ResumeReceived, RunCompleted, Snapshot
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.projector import decode_state, load_state
from tests.archive.helpers import T0, read_all, record_run
from tests.support.archive import NOW


async def test_finished_runs_are_archived_and_replay_identically(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    expected = {
        "done": await record_run(hot, "done", end="completed", tag=1),
        "failed": await record_run(hot, "failed", end="failed", tag=2),
        "cancelled": await record_run(hot, "cancelled", end="cancelled", tag=3),
    }
    live = await record_run(hot, "live", end=None, start=NOW - timedelta(hours=1))

    summary = await Archiver(hot, store).run(now=NOW)

    assert sorted(summary.run_ids) == ["cancelled", "done", "failed"]
    assert summary.events == sum(len(v) for v in expected.values())
    assert summary.pruned == 3 and summary.files >= 1 and summary.bytes_after > 0
    for run_id in expected:
        pruned = await hot.find_run(run_id)  # pruned from the hot store: a tombstone stays
        assert pruned is not None and pruned.archived
        with pytest.raises(RunArchivedError):
            await read_all(hot, run_id)
    assert await read_all(hot, "live") == live  # the running run is untouched
    history = ArchivedEventReader(hot, store)
    for run_id, events in expected.items():
        assert await read_all(history, run_id) == events
    info = await history.get_run("failed")
    assert (info.status, info.last_seq, info.workflow, info.version) == (
        "failed",
        len(expected["failed"]),
        "research",
        "v2",
    )
    listed = {r.run_id for r in await history.list_runs()}
    assert listed == {"done", "failed", "cancelled", "live"}
    await history.close()


async def test_rerun_never_duplicates(hot: SqliteEventLog, store: LocalArchiveStore) -> None:
    await record_run(hot, "a", tag=1)
    first = await Archiver(hot, store).run(now=NOW)
    files = store.list()
    second = await Archiver(hot, store).run(now=NOW)
    assert first.events > 0
    assert (second.runs, second.events, second.files) == (0, 0, 0)
    assert store.list() == files
    with await open_sql(store, hot) as db:
        rows = db.sql(
            "SELECT count(*), count(DISTINCT seq) FROM events WHERE run_id='a'"
        ).fetchall()
    assert rows == [(first.events, first.events)]


async def test_archiving_a_running_run_is_a_typed_error_and_prunes_nothing(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    await record_run(hot, "finished", tag=1)
    live = await record_run(hot, "live", end=None, start=NOW - timedelta(minutes=5))
    with pytest.raises(RunNotArchivableError, match="'live' is running"):
        await Archiver(hot, store).run(run_ids=["finished", "live"], now=NOW)
    assert await read_all(hot, "live") == live
    assert await hot.find_run("finished") is not None
    assert store.list() == []


async def test_idle_runs_are_archived_and_keep_their_index_row(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    events = await record_run(hot, "parked", end=None, start=NOW - timedelta(days=30))
    await hot.save_snapshot(Snapshot("parked", 5, b"state", NOW - timedelta(days=30)))
    fresh = await record_run(hot, "fresh", end=None, start=NOW - timedelta(hours=2))
    config = ArchiverConfig(RetentionPolicies(RetentionPolicy(idle_after=timedelta(days=7))))

    summary = await Archiver(hot, store, config).run(now=NOW)

    assert summary.run_ids == ("parked",)
    kept = await hot.find_run("parked")
    assert kept is not None and kept.last_seq == len(events)
    assert (await hot.load_snapshot("parked")) is not None
    assert await read_all(hot, "fresh") == fresh
    history = ArchivedEventReader(hot, store)
    assert await read_all(history, "parked") == events

    # The parked run resumes: new events go hot, and the next pass archives only them.
    more = [
        Event("parked", len(events) + 1, ResumeReceived("late"), NOW, kept.writer_epoch),
        Event("parked", len(events) + 2, RunCompleted("ok"), NOW, kept.writer_epoch),
    ]
    await hot.append(more)
    history.archive.refresh()
    assert await read_all(history, "parked") == events + more
    second = await Archiver(hot, store, config).run(now=NOW + timedelta(days=1))
    assert second.run_ids == ("parked",) and second.events == 2
    history.archive.refresh()
    assert await read_all(history, "parked") == events + more
    assert (await history.get_run("parked")).status == "completed"
    await history.close()


async def test_latest_snapshot_policy_keeps_the_snapshot_hot(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    await record_run(hot, "keep", workflow="chat", tag=1)
    await record_run(hot, "drop", workflow="research", tag=2)
    for run_id in ("keep", "drop"):
        await hot.save_snapshot(Snapshot(run_id, 4, b"s4", T0))
        await hot.save_snapshot(Snapshot(run_id, 8, b"s8", T0))
    policies = RetentionPolicies(
        per_workflow={"chat": RetentionPolicy(RetentionMode.LATEST_SNAPSHOT)}
    )
    await Archiver(hot, store, ArchiverConfig(policies)).run(now=NOW)
    snap = await hot.load_snapshot("keep")
    assert snap is not None and snap.seq == 8
    assert await hot.load_snapshot("keep", at_or_before=7) is None
    assert await hot.load_snapshot("drop") is None
    assert (await hot.get_run("drop")).archived
    again = await Archiver(hot, store, ArchiverConfig(policies)).run(now=NOW)
    assert again.events == 0 and again.pruned == 0


async def test_ttl_policy_expires_archive_files(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    await record_run(hot, "short", workflow="scratch", tag=1)
    await record_run(hot, "long", workflow="research", tag=2)
    policies = RetentionPolicies(
        per_workflow={"scratch": RetentionPolicy(RetentionMode.TTL, ttl=timedelta(days=10))}
    )
    archiver = Archiver(hot, store, ArchiverConfig(policies))
    first = await archiver.run(now=NOW)
    assert first.expired_files == 0 and first.runs == 2
    later = await archiver.run(now=NOW + timedelta(days=11))
    assert later.expired_files == 1
    manifest = Manifest.load(store)
    assert set(manifest.segments) == {"long"}
    assert not [k for k in store.list() if "workflow=scratch" in k]


async def test_dry_run_changes_nothing(hot: SqliteEventLog, store: LocalArchiveStore) -> None:
    events = await record_run(hot, "a", tag=1)
    summary = await Archiver(hot, store).run(dry_run=True, now=NOW)
    assert summary.dry_run and summary.runs == 1 and summary.events == len(events)
    assert store.list() == []
    assert await read_all(hot, "a") == events


async def test_orphan_file_from_a_crash_is_removed_and_rewritten(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    await record_run(hot, "a", tag=1)
    await Archiver(hot, store).run(now=NOW)
    manifest_keys = store.list(MANIFEST_PREFIX)
    parquet = [k for k in store.list() if k.endswith(".parquet")]
    # A crash between the file write and its manifest entry leaves an orphan file.
    store.put("workflow=research/day=2024-03-01/part-orphan.parquet", store.get(parquet[0]) or b"")
    store.put("workflow=research/day=2024-03-01/.tmp-x-part.parquet", b"partial")
    summary = await Archiver(hot, store).run(now=NOW)
    assert summary.orphans_removed == 2
    assert store.list(MANIFEST_PREFIX) == manifest_keys
    assert [k for k in store.list() if k.endswith(".parquet")] == parquet


async def test_confirmed_but_unpruned_runs_are_pruned_by_the_next_pass(
    hot: SqliteEventLog, tmp_path: object
) -> None:
    """A crash after the manifest entry but before the prune: the next pass prunes."""
    events = await record_run(hot, "a", tag=1)

    class NoPrune(SqliteEventLog):
        async def prune_many(
            self, run_ids: Sequence[str], *, keep_latest_snapshot: bool = False
        ) -> None:
            raise RuntimeError("crash before prune")

    store = LocalArchiveStore(f"{tmp_path}/arch2")
    frozen = NoPrune(hot.path)
    try:
        with pytest.raises(RuntimeError):
            await Archiver(frozen, store).run(now=NOW)
    finally:
        await frozen.close()
    assert await read_all(hot, "a") == events  # nothing pruned
    with await open_sql(store, hot) as db:  # archived and hot: counted once
        assert db.sql("SELECT count(*) FROM events").fetchone() == (len(events),)
    summary = await Archiver(hot, store).run(now=NOW)
    assert (summary.events, summary.pruned) == (0, 1)
    assert (await hot.get_run("a")).archived
    assert await read_all(ArchivedEventReader(hot, store), "a") == events


async def test_many_runs_split_into_files_and_partitions(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    expected = {}
    for i in range(12):
        start = T0 + timedelta(days=i % 3)
        workflow = "research" if i % 2 else "chat"
        expected[f"r{i:02d}"] = await record_run(
            hot, f"r{i:02d}", workflow=workflow, start=start, tag=i
        )
    config = ArchiverConfig(max_events_per_file=40, row_group_size=16)
    summary = await Archiver(hot, store, config).run(now=NOW + timedelta(days=3))
    assert summary.runs == 12
    keys = [k for k in store.list() if k.endswith(".parquet")]
    assert {k.split("/")[0] for k in keys} == {"workflow=chat", "workflow=research"}
    assert len({k.split("/")[1] for k in keys}) == 3
    history = ArchivedEventReader(hot, store)
    for run_id, events in expected.items():
        assert await read_all(history, run_id) == events
        assert [e async for e in history.read(run_id, after_seq=3, upto_seq=6)] == events[3:6]
    await history.close()


async def test_later_segment_without_run_started_keeps_workflow(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    events = await record_run(hot, "seg", end=None, start=NOW - timedelta(days=30))
    bare = await record_run(hot, "bare", end=None, start=NOW - timedelta(days=30))
    await hot.save_snapshot(Snapshot("seg", 3, b"s", NOW - timedelta(days=30)))
    first = await Archiver(hot, store).run(now=NOW)
    assert sorted(first.run_ids) == ["bare", "seg"] and first.pruned == 2
    # Unfinished runs stay resumable: each got a good snapshot at its last seq first.
    for run_id, recorded in (("bare", bare), ("seg", events)):
        snapshot = await hot.load_snapshot(run_id)
        assert snapshot is not None and snapshot.seq == len(recorded)
        assert decode_state(snapshot) == await load_state(
            ArchivedEventReader(hot, store), run_id, use_snapshots=False
        )
    assert await read_all(ArchivedEventReader(hot, store), "seg") == events
    info = await hot.find_run("seg")
    assert info is not None
    await hot.append([Event("seg", info.last_seq + 1, RunCompleted(1), NOW, info.writer_epoch)])
    await Archiver(hot, store).run(now=NOW)
    with await open_sql(store, hot) as db:
        assert db.sql(
            "SELECT DISTINCT workflow, version FROM events WHERE run_id = 'seg'"
        ).fetchall() == [("research", "v2")]
        assert db.sql("SELECT status FROM runs WHERE run_id = 'seg'").fetchone() == ("completed",)
