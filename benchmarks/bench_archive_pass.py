"""The archive pass over a SQLite hot log, piece by piece, beside its floors (issue 23, item 9).

A SQLite hot log holds runs of 100 realistic events (the runs of
:mod:`benchmarks.bench_archive`, one day of 28 each, so a pass writes 28
files); each round archives a fresh copy of it to a local folder, pruning
included, and reports events per second (wall clock) and events per CPU
second (the process's CPU, all its threads: the machine is shared, so the CPU
figure is the steadier one).

Then the hot log's side of pruning, the pass's files pruned a run a
transaction (``prune``) or a file a transaction (``prune_many``), wall and
CPU µs an event. Then the pass's pieces, each timed on the same stored rows (CPU, best of
three, per event): reading the rows' maps into columns (``add_rows``), the
Arrow table, the events file (Parquet, zstd) and the tasks table. Beside
them, the floors: what the libraries the pass cannot avoid cost per event on
this machine, with no Python around them:

* ``unpack``: ormsgpack reading each stored map (each result dropped);
* ``render``: orjson writing each map as ``payload_json``;
* ``arrow copy``: the two payload columns into Arrow (a memory copy);
* ``zstd``: Parquet of the two payload columns alone, zstd, minus the same
  uncompressed (the compression the archive's size depends on).

Their sum is the least a pass can cost per event on one core: a target
below it is out of reach here without another layout or another core.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import ormsgpack
import pyarrow as pa
import pyarrow.parquet as pq

from agentlog.archive import Archiver, LocalArchiveStore
from agentlog.archive._parquet import encode_parquet
from agentlog.archive._rows import Columns
from agentlog.archive._tasks_table import encode_tasks
from agentlog.eventlog.sqlite import SqliteEventLog
from benchmarks.bench_archive import EVENTS_PER_RUN, NOW, _run_events, run_id
from benchmarks.harness import Row

AREA = "archive_pass"
#: The target: 300,000 events a second, 3.3 µs an event in all.
TARGET_US = 1e6 / 300_000


def _load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


async def _fill(path: Path, runs: int) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """``runs`` runs in a SQLite log at ``path``; their stored rows, as the archiver reads them."""
    async with SqliteEventLog(path) as log:
        for k in range(runs):
            await log.claim_writer(run_id(k))
            await log.append(_run_events(run_id(k), EVENTS_PER_RUN, k))
        reads = []
        for k in range(runs):
            rows: list[tuple[Any, ...]] = []
            async for batch in log.read_rows(run_id(k)):
                rows += batch
            reads.append((run_id(k), rows))
    return reads


def _cpu_us(fn: Callable[[], Any], events: int, repeat: int = 3) -> tuple[float, Any]:
    """The best of ``repeat`` CPU times of ``fn``, in µs per event; its last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.process_time()
        result = fn()
        best = min(best, time.process_time() - start)
    return best / events * 1e6, result


def _pass(hot: Path, folder: Path) -> tuple[float, float, int]:
    """One archive pass of a copy of ``hot``: wall seconds, CPU seconds, events."""

    async def go() -> tuple[float, float, int]:
        async with SqliteEventLog(hot) as log:
            store = LocalArchiveStore(folder)
            wall, cpu = time.perf_counter(), time.process_time()
            summary = await Archiver(log, store).run(now=NOW)
            return time.perf_counter() - wall, time.process_time() - cpu, summary.events

    return asyncio.run(go())


def _prune_side(hot: Path, tmp: Path, runs: int) -> dict[str, tuple[float, float]]:
    """The hot log's side of pruning a pass's files (28, one a day): each run in
    its own transaction (``prune``, as the archiver did before session 31), or a
    file's runs in one (``prune_many``); fresh copies, alternating, best of
    three; (wall, CPU) µs an event."""
    files = [[run_id(k) for k in range(runs) if k % 28 == day] for day in range(28)]

    async def prune(path: Path, batched: bool) -> tuple[float, float]:
        async with SqliteEventLog(path) as log:
            wall, cpu = time.perf_counter(), time.process_time()
            for ids in files:
                if batched:
                    await log.prune_many(ids)
                else:
                    for rid in ids:
                        await log.prune(rid)
            return time.perf_counter() - wall, time.process_time() - cpu

    best: dict[str, tuple[float, float]] = {}
    for i in range(3):
        for label, batched in (("a run at a time", False), ("a file at a time", True)):
            copy = tmp / f"prune{i}{batched}.db"
            shutil.copy(hot, copy)
            wall, cpu = asyncio.run(prune(copy, batched))
            old = best.get(label, (float("inf"), float("inf")))
            best[label] = (min(old[0], wall), min(old[1], cpu))
    events = runs * EVENTS_PER_RUN
    return {k: (w / events * 1e6, c / events * 1e6) for k, (w, c) in best.items()}


def _encode_tasks(columns: Columns, table: pa.Table) -> bytes:
    """The tasks table as the archiver writes it: folded from the columns where
    this tree can (``_tasks_fold``), else grouped by DuckDB (an older tree)."""
    try:
        from agentlog.archive._tasks_fold import tasks_of
        from agentlog.archive._tasks_table import encode_tasks_table
    except ImportError:
        return encode_tasks(table)
    return encode_tasks_table(tasks_of(columns))


def _pieces(reads: list[tuple[str, list[tuple[Any, ...]]]]) -> dict[str, float]:
    events = sum(len(rows) for _, rows in reads)

    def add() -> Columns:
        columns = Columns()
        for rid, rows in reads:
            columns.add_rows(
                rid,
                rows,
                workflow="bench",
                version="1",
                status="running",
                steps=0,
                cipher=None,
                where="bench",
            )
        return columns

    out: dict[str, float] = {}
    out["add_rows"], columns = _cpu_us(add, events)
    out["arrow table"], table = _cpu_us(columns.table, events)
    out["events file (parquet zstd)"], raw = _cpu_us(lambda: encode_parquet(table), events)
    out["tasks table"], _ = _cpu_us(lambda: _encode_tasks(columns, table), events)
    out["bytes an event"] = len(raw) / events
    payloads = [row[5] for _, rows in reads for row in rows]
    out["floor: unpack (ormsgpack)"], _ = _cpu_us(
        lambda: [len(ormsgpack.unpackb(p)) for p in payloads], events
    )
    maps = [ormsgpack.unpackb(p) for p in payloads]
    out["floor: render (orjson)"], texts = _cpu_us(lambda: [orjson.dumps(m) for m in maps], events)

    out["floor: arrow copy of payloads"], pair = _cpu_us(
        lambda: pa.table(
            {"payload": pa.array(payloads, pa.binary()), "payload_json": pa.array(texts)}
        ),
        events,
    )

    def parquet(compression: str) -> int:
        sink = pa.BufferOutputStream()
        pq.write_table(pair, sink, compression=compression, write_statistics=True)
        return int(sink.getvalue().size)

    zstd, _ = _cpu_us(lambda: parquet("zstd"), events)
    plain, _ = _cpu_us(lambda: parquet("none"), events)
    out["floor: zstd of payloads"] = zstd - plain
    return out


def collect(quick: bool) -> list[Row]:
    """The pass (three rounds) and its pieces with their floors (``quick``: 10,000 events)."""
    runs = 100 if quick else 300
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        hot = Path(tmp) / "hot.db"
        reads = asyncio.run(_fill(hot, runs))
        events = sum(len(r) for _, r in reads)
        rounds = []
        for i in range(3):
            copy = Path(tmp) / f"copy{i}.db"
            shutil.copy(hot, copy)
            load = _load()
            wall, cpu, archived = _pass(copy, Path(tmp) / f"archive{i}")
            assert archived == events
            rounds.append((events / wall, events / cpu, load))
        for label, index in (("events/s (wall)", 0), ("events per CPU second", 1)):
            values = sorted(r[index] for r in rounds)
            rows.append(
                Row(
                    AREA,
                    f"archive pass, SQLite hot log: {label}",
                    "events/s",
                    values[1],
                    None,
                    {
                        "rounds": " / ".join(f"{r[index]:,.0f}" for r in rounds),
                        "events": events,
                        "load": rounds[1][2],
                        "target": ">= 300,000 events/s",
                    },
                    len(rounds),
                )
            )
        load = _load()
        pruning = _prune_side(hot, Path(tmp), runs)
        for label, (wall_us, cpu_us) in pruning.items():
            rows.append(
                Row(
                    AREA,
                    f"per event: pruning the hot log, {label}",
                    "us",
                    wall_us,
                    None,
                    {"cpu_us": round(cpu_us, 2), "load": load, "files": 28},
                    3,
                )
            )
        load = _load()
        pieces = _pieces(reads)
    floor = sum(v for k, v in pieces.items() if k.startswith("floor:"))
    for name, value in pieces.items():
        unit = "B" if name == "bytes an event" else "us"
        rows.append(Row(AREA, f"per event: {name}", unit, value, None, {"load": load}, 1))
    pass_us = sum(
        pieces[k] for k in ("add_rows", "arrow table", "events file (parquet zstd)", "tasks table")
    )
    rows.append(
        Row(
            AREA,
            "per event: the pieces' sum vs the libraries' floor",
            "us",
            pass_us,
            None,
            {"floor_us": round(floor, 2), "target_us": round(TARGET_US, 2), "load": load},
            1,
        )
    )
    return rows
