"""The replay debugger's data layer: the run list and one long run, paged.

* ``RunCatalog.page`` over 100,000 runs: 70,000 hot in SQLite and 30,000
  archived (their events in Parquet files with manifest entries, their
  tombstones in the hot index, as the archiver leaves them). The first page,
  a filtered page (status and workflow), a run id search, and a deep page
  (offset 90,000). Target: < 500 ms per page.
* The same archived runs listed from the archive alone (no hot log): DuckDB
  pages the manifest's runs.
* ``RunHistory`` on a 100,000-event run: a page of 200 events at the start
  and deep in the run, ``state_at`` at the last seq (a snapshot is there) and
  mid-run (the backend keeps only the newest snapshots, so it folds from the
  start), and ``diff_at``.

The data is written directly in batches (rows through the SQLite schema's own
helpers, Parquet through the archive writer's), not run by run through the
runtime, so building it takes seconds.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agentlog.archive import LocalArchiveStore
from agentlog.archive._parquet import (
    ManifestEntry,
    Segment,
    encode_parquet,
    events_to_table,
    file_key,
)
from agentlog.eventlog import (
    Event,
    RunCompleted,
    RunFailed,
    RunInfo,
    RunStarted,
    StepCompleted,
    SuperstepCommitted,
    TaskCompleted,
    TaskStarted,
)
from agentlog.eventlog._row_format import event_row, info_to_row
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.eventlog.sqlite._schema import INSERT_EVENT, UPSERT_RUN
from agentlog.projector import fold, save_state
from agentlog.replay import RunCatalog, RunHistory
from benchmarks.harness import Row, row_from_samples

AREA = "catalog"
T0 = datetime(2025, 1, 1, tzinfo=UTC)
WORKFLOWS = ("research", "support", "billing", "triage")


def _run(run_id: str, i: int) -> list[Event]:
    """A small finished (or failed, or still running) run, updated at second ``i``."""
    at = T0 + timedelta(seconds=i)
    data: list[Any] = [
        RunStarted(WORKFLOWS[i % 4], "1", {"q": i}, "sync", "fp", {}, ["s"]),
        StepCompleted("s", 0, 0, {"n": i}),
    ]
    if i % 7:
        data.append(RunFailed("boom") if i % 11 == 0 else RunCompleted())
    return [Event(run_id, n, d, ts=at, writer_epoch=1) for n, d in enumerate(data, 1)]


def build_runs(db: Path, store: LocalArchiveStore, hot: int, archived: int) -> None:
    """``hot`` runs in the SQLite file, ``archived`` ones in the archive (tombstones hot)."""
    asyncio.run(SqliteEventLog(db).close())  # the schema, by its migrations
    conn = sqlite3.connect(db)
    chunk: list[tuple[Segment, list[Event]]] = []
    with conn:
        for i in range(hot + archived):
            run_id = f"run-{i:06d}"
            events = _run(run_id, i)
            info = RunInfo(run_id, writer_epoch=1).after(events)
            if i % 10 < 3 and archived:  # 3 in 10 archived, spread over time
                archived -= 1
                conn.execute(
                    UPSERT_RUN, info_to_row(RunInfo(**{**_fields(info), "archived": True}))
                )
                seg = Segment.of(
                    events,
                    workflow=info.workflow,
                    version=info.version,
                    status="running",
                    steps=0,
                    started_at=info.started_at,
                )
                chunk.append((seg, events))
                if len(chunk) == 1000:
                    _write_file(store, chunk)
                    chunk = []
            else:
                conn.executemany(INSERT_EVENT, [event_row(e, 1, None) for e in events])
                conn.execute(UPSERT_RUN, info_to_row(info))
    if chunk:
        _write_file(store, chunk)
    conn.close()


def _fields(info: RunInfo) -> dict[str, Any]:
    return {name: getattr(info, name) for name in info.__slots__}


def _write_file(store: LocalArchiveStore, chunk: list[tuple[Segment, list[Event]]]) -> None:
    segments = [seg for seg, _ in chunk]
    table = events_to_table([e for _, events in chunk for e in events], version="1")
    key = file_key("mixed", "2025-01-01", segments)
    raw = encode_parquet(table)
    store.put(key, raw)
    entry = ManifestEntry(
        key, len(table), len(raw), "mixed", "2025-01-01", T0.isoformat(), tuple(segments)
    )
    store.put(entry.key, entry.to_json())


async def build_long_run(log: SqliteEventLog, count: int) -> None:
    """One run of ``count`` events (tasks and steps), appended in batches of 1,000,
    with a snapshot every 10,000 events (the log keeps the newest three)."""
    events = [
        Event("long", 1, RunStarted("long", "1", {}, "async", "fp", start=["s"]), writer_epoch=1)
    ]
    superstep = 0
    while len(events) < count:
        key = f"k{superstep}"
        for data in (
            TaskStarted(key, "search", "s", superstep, 0, 0),
            TaskCompleted(key, {"hits": superstep}, 1.5),
            StepCompleted("s", superstep, 0, {"counter": superstep, "note": "x" * 80}, ["s"]),
            SuperstepCommitted(superstep, ["s"]),
        ):
            events.append(Event("long", len(events) + 1, data, writer_epoch=1))
        superstep += 1
    events = events[:count]
    epoch = await log.claim_writer("long")
    events = [Event("long", e.seq, e.data, ts=e.ts, writer_epoch=epoch) for e in events]
    for start in range(0, count, 1000):
        await log.append(events[start : start + 1000], durable=False)
    state = fold([])
    for start in range(0, count, 10_000):
        state = fold(events[start : start + 10_000], state)
        await save_state(log, state)


async def _fresh_timeline(log: SqliteEventLog) -> dict[str, Any]:
    """The timeline as a newly opened page builds it: its latest 200 steps,
    from the events of those steps (:mod:`agentlog.replay._timeline_window`)."""
    async with await RunHistory.open("long", log) as run:
        return await run.timeline(first_step=None, max_steps=200)


async def _click(run: RunHistory, seq: int) -> None:
    """What clicking event ``seq`` asks for: its state and its diff."""
    await run.state_at(seq)
    await run.diff_at(seq)


async def _fresh(log: SqliteEventLog, seq: int) -> None:
    """A click on event ``seq`` of a newly opened run page."""
    async with await RunHistory.open("long", log) as run:
        await _click(run, seq)


async def _time(fn: Callable[[], Awaitable[Any]], repeat: int) -> list[float]:
    await fn()  # warm up (caches, the archive index)
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - started)
    return samples


async def _measure(root: Path, hot: int, archived: int, long_events: int, repeat: int) -> list[Row]:
    db, store = root / "hot.db", LocalArchiveStore(root / "archive")
    started = time.perf_counter()
    await asyncio.to_thread(build_runs, db, store, hot, archived)
    built = time.perf_counter() - started
    rows = []
    total = hot + archived
    async with SqliteEventLog(db) as log:
        catalog = RunCatalog(log, store)
        deep = max(0, total - total // 10)
        cases: list[tuple[str, dict[str, Any]]] = [
            ("first page", {}),
            ("filtered page (status+workflow)", {"status": "failed", "workflow": "support"}),
            ("run id search", {"text": "1234"}),
            (f"deep page (offset {deep:,})", {"offset": deep}),
        ]
        for name, kwargs in cases:
            samples = await _time(lambda kw=kwargs: catalog.page(**kw), repeat)
            page = await catalog.page(**kwargs)
            rows.append(
                row_from_samples(
                    AREA,
                    f"runs page: {name}",
                    samples,
                    runs=total,
                    matched=page.total,
                    rows=len(page.rows),
                    target_ms=500,
                    build_s=round(built, 1),
                )
            )
        await catalog.close()
        alone = RunCatalog(None, store)
        deep_archived = max(0, archived - 50)
        samples = await _time(lambda: alone.page(offset=deep_archived), repeat)
        rows.append(
            row_from_samples(
                AREA,
                f"archive-only runs page (offset {deep_archived:,})",
                samples,
                runs=archived,
            )
        )
        await alone.close()

        started = time.perf_counter()
        await build_long_run(log, long_events)
        built = time.perf_counter() - started
        mid = long_events // 2 + 1
        step = iter(range(mid, long_events))
        async with await RunHistory.open("long", log) as run:
            cases = (
                ("events: first 200", lambda: run.events(limit=200)),
                (f"events: 200 after seq {mid:,}", lambda: run.events(after=mid, limit=200)),
                (
                    "state_at + diff_at: last seq, fresh page (from a snapshot)",
                    lambda: _fresh(log, long_events),
                ),
                (
                    f"state_at + diff_at: seq {mid:,}, fresh page (from seq 1)",
                    lambda: _fresh(log, mid),
                ),
                ("state_at + diff_at: stepping to the next seq", lambda: _click(run, next(step))),
                (
                    "timeline: latest 200 steps, fresh page",
                    lambda: _fresh_timeline(log),
                ),
            )
            for name, fn in cases:
                slow = "fresh" in name
                samples = await _time(fn, max(3, repeat // 8) if slow else repeat)
                rows.append(
                    row_from_samples(
                        AREA,
                        f"run page: {name}",
                        samples,
                        events=long_events,
                        build_s=round(built, 1),
                    )
                )
    return rows


def collect(quick: bool) -> list[Row]:
    hot, archived, long_events, repeat = (
        (7_000, 3_000, 10_000, 10) if quick else (70_000, 30_000, 100_000, 40)
    )
    with tempfile.TemporaryDirectory(prefix="agentlog-bench-catalog-") as tmp:
        return asyncio.run(_measure(Path(tmp), hot, archived, long_events, repeat))
