"""The archive's tasks tables: the ``tasks`` view reads them instead of grouping
every event (issue 23), and says exactly what grouping the events said."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchmarks.bench_archive import GROUPED_TASKS

from agentlog.archive import Archiver, ArchiverConfig, LocalArchiveStore, open_sql
from agentlog.archive._parquet import MANIFEST_PREFIX, Manifest, ManifestEntry
from agentlog.archive._retention import RetentionMode, RetentionPolicies, RetentionPolicy
from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.eventlog import (
    Event,
    RunCompleted,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
)
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.archive.helpers import T0, record_run
from tests.support.archive import NOW

# What the view said when it grouped every task event at query time (before
# tasks tables): the reference the tables must reproduce (the benchmark times
# the same SQL against the view).
GROUPED = GROUPED_TASKS

_COLUMNS = "run_id, key, name, step, attempts, status, started, ended, duration_ms, error"
_ORDER = " ORDER BY run_id, key"

#: Unfinished runs are archived once idle this long (NOW is a day after T0).
_IDLE = ArchiverConfig(RetentionPolicies(RetentionPolicy(idle_after=timedelta(hours=1))))


async def _both(store: LocalArchiveStore | None, hot: SqliteEventLog | None) -> tuple[Any, Any]:
    """The ``tasks`` view's rows and the grouped events' rows, in one order."""
    with await open_sql(store, hot) as db:
        view = db.arrow(f"SELECT {_COLUMNS} FROM tasks{_ORDER}").to_pylist()
        grouped = db.arrow(f"SELECT {_COLUMNS} FROM ({GROUPED}){_ORDER}").to_pylist()
    return [tuple(row.values()) for row in view], [tuple(row.values()) for row in grouped]


async def _record_kinds(hot: SqliteEventLog) -> None:
    """Runs of every golden kind: each end, a retried task, a pending one."""
    await record_run(hot, "ok", tag=1, steps=3)
    await record_run(hot, "bad", end="failed", tag=2, steps=2)
    await record_run(hot, "cancel", end="cancelled", tag=3, steps=4)
    events = await record_run(hot, "open", end=None, tag=4, steps=2)
    pending = TaskStarted("k-open-late", "search", "late", 9, 0, 0)
    await hot.append([Event("open", len(events) + 1, pending, T0, events[0].writer_epoch)])


def _tasks_files(store: LocalArchiveStore) -> list[str]:
    return [k for k in store.list() if k.endswith(".tasks.parquet")]


async def test_view_equals_the_grouped_events_archived_and_hot(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    await _record_kinds(hot)
    await Archiver(hot, store).run(now=NOW, run_ids=["ok", "bad"])  # "cancel", "open" stay hot
    assert len(_tasks_files(store)) == 1
    view, grouped = await _both(store, hot)
    assert view == grouped
    assert {row[0] for row in view} == {"ok", "bad", "cancel", "open"}
    await Archiver(hot, store, _IDLE).run(now=NOW)  # the rest, "open" idle
    view, grouped = await _both(store, hot)
    assert view == grouped and len(view) == 12


async def test_tasks_view_reads_no_events_file(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    """With a tasks table beside every file, the view never reads the events
    files (issue 23: grouping them cost 7.9 s at 10M events)."""
    await _record_kinds(hot)
    await Archiver(hot, store, _IDLE).run(now=NOW)
    with await open_sql(store) as db:
        (_, plan), *_ = db.sql(
            "EXPLAIN (FORMAT JSON) SELECT name, quantile_cont(duration_ms, 0.95) FROM tasks "
            "GROUP BY name"
        ).fetchall()
    reads = _parquet_reads(json.loads(plan))
    assert reads, plan  # the tasks tables
    assert all("type" not in cols and "payload_json" not in cols for cols in reads), plan


def _parquet_reads(plan: Any) -> list[list[str]]:
    """The columns each Parquet scan of a JSON query plan reads."""
    if isinstance(plan, list):
        return [cols for node in plan for cols in _parquet_reads(node)]
    found = [_parquet_reads(plan.get("children", []))]
    if plan.get("name") == "READ_PARQUET":
        projected = plan.get("extra_info", {}).get("Projections", [])
        found.append([[projected] if isinstance(projected, str) else list(projected)])
    return [cols for group in found for cols in group]


async def test_a_task_split_across_passes_and_the_hot_log(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    """A task started before one pass and finished after it: its parts (two
    files, or a file and the hot log) merge into the row grouping says."""
    events = await record_run(hot, "split", end=None, tag=5, steps=2)
    epoch, seq = events[0].writer_epoch, len(events)
    late = T0 + timedelta(minutes=5)
    first = [
        TaskStarted("k-split", "fetch", "late", 9, 0, 0),
        TaskFailed("k-split", "TimeoutError: again", 1, 0.0),
    ]
    rest = [
        TaskStarted("k-split", "fetch", "late", 9, 0, 0, attempt=2),
        TaskCompleted("k-split", {"ok": True}, 0.0),
        RunCompleted({"answer": 1}),
    ]
    appended = [
        Event("split", seq + 1 + i, data, late + timedelta(seconds=10 * i), epoch)
        for i, data in enumerate(first + rest)
    ]
    await hot.append(appended[:2])
    await Archiver(hot, store, _IDLE).run(now=NOW)  # idle: archived, kept hot (live lease)
    await hot.append(appended[2:])
    view, grouped = await _both(store, hot)  # one file and the hot log
    assert view == grouped
    split = [row for row in view if row[1] == "k-split"]
    assert split[0][4:6] == (2, "completed") and split[0][8] == 30_000.0
    assert split[0][9] == "TimeoutError: again"
    await Archiver(hot, store, _IDLE).run(now=NOW)
    assert len(Manifest.load(store).segments["split"]) == 2
    view_files, grouped_files = await _both(store, None)  # two files, nothing hot
    assert view_files == grouped_files == view


async def test_archives_without_tasks_tables_still_read(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    """Files archived before tasks tables existed: the view groups their events."""
    await _record_kinds(hot)
    await Archiver(hot, store).run(now=NOW, run_ids=["ok", "bad"])
    view_before, _ = await _both(store, hot)
    for key in store.list(MANIFEST_PREFIX):  # rewrite the entries as an older release did
        entry = ManifestEntry.from_json(store.get(key) or b"", key)
        body = json.loads(entry.to_json())
        del body["tasks_file"]
        store.put(key, json.dumps(body).encode())
        store.delete(entry.tasks_file)
    assert not _tasks_files(store)
    assert all(not e.tasks_file for e in Manifest.load(store).entries.values())
    view, grouped = await _both(store, hot)
    assert view == grouped == view_before
    await Archiver(hot, store, _IDLE).run(now=NOW)  # new files get tables, old ones not
    assert len(_tasks_files(store)) == 1
    view, grouped = await _both(store, hot)
    assert view == grouped and len(view) == 12


async def test_orphan_removal_keeps_tasks_tables_and_expiry_deletes_them(
    hot: SqliteEventLog, store: LocalArchiveStore
) -> None:
    await record_run(hot, "a", tag=1)
    await Archiver(hot, store).run(now=NOW)
    (tasks,) = _tasks_files(store)
    entry = next(iter(Manifest.load(store).entries.values()))
    assert entry.tasks_file == tasks
    orphan = tasks.replace("part-", "part-orphan")
    store.put(orphan, store.get(tasks) or b"")
    summary = await Archiver(hot, store).run(now=NOW)
    assert summary.orphans_removed == 1
    assert _tasks_files(store) == [tasks]
    ttl = RetentionPolicy(RetentionMode.TTL, ttl=timedelta(days=1))
    expiring = Archiver(hot, store, ArchiverConfig(RetentionPolicies(ttl)))
    assert (await expiring.run(now=NOW + timedelta(days=2))).expired_files == 1
    assert not [k for k in store.list() if k.endswith(".parquet")]


async def test_encrypted_runs_errors_open_with_the_keys_only(
    tmp_path: Path, store: LocalArchiveStore
) -> None:
    """A sealed run's task error: the tasks table keeps it sealed (no plaintext
    in the file); the view opens it for a key holder, as ``events`` does."""
    keys = PayloadCipher(LocalKeyStore(tmp_path / "keyring.json"))
    sealed = SqliteEventLog(tmp_path / "sealed.db", cipher=keys)
    try:
        await record_run(sealed, "enc", end="failed", tag=7, steps=2)
        await Archiver(sealed, store).run(now=NOW)
        (tasks,) = _tasks_files(store)
        assert b"TimeoutError: slow" not in (store.get(tasks) or b"")
        with await open_sql(store, keys=keys) as db:
            opened = db.arrow(f"SELECT {_COLUMNS} FROM tasks{_ORDER}").to_pylist()
            grouped = db.arrow(f"SELECT {_COLUMNS} FROM ({GROUPED}){_ORDER}").to_pylist()
        assert opened == grouped
        assert [row["error"] for row in opened] == [None, "TimeoutError: slow"]
        view, grouped_keyless = await _both(store, None)
        assert view == grouped_keyless
        assert [row[9] for row in view] == [None, None]
    finally:
        await sealed.close()
