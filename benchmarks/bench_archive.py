"""Archive benchmarks: archive throughput (local, S3), SQL over many events, bytes/event.

* Throughput: runs of ~100 events in a MemoryEventLog (so the hot read costs
  little and the archiver itself is measured), archived to a local folder and
  to moto_server on loopback, pruning included.
* SQL: ``quick`` ~100k events, else 10M. The events are made synthetically
  straight into Parquet through the archive writer (going through the log
  would take far longer): one chunk of real encoded events is written, then
  copied into more files with only the run_id column rewritten.
* Bytes per event: the Parquet archive vs the same events in a SQLite hot log.

Every run is an agent's: a question, then tasks whose results are tool results
of about 80 bytes (search hits, fetched pages, summaries, chat messages,
base64 embeddings) and steps that each append a chat message of about 70
bytes (the sizes the repeated-character payloads had before), all from
``benchmarks/payloads.py`` and all different, so that Parquet's zstd gains
only what it would gain on real agents' data.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from agentlog.archive import Archiver, ArchiverConfig, LocalArchiveStore, S3ArchiveStore, S3Config
from agentlog.archive._sql import open_sql
from agentlog.archive._writer import ManifestEntry, Segment, encode_parquet, events_to_table
from agentlog.eventlog import (
    Event,
    MemoryEventLog,
    RunCompleted,
    RunStarted,
    StepCompleted,
    TaskCompleted,
    TaskStarted,
)
from agentlog.eventlog.events import EventData
from benchmarks import payloads
from benchmarks.harness import Row, row_from_samples, time_calls

AREA = "archive"
T0 = datetime(2024, 3, 1, tzinfo=UTC)
EVENTS_PER_RUN = 100
TASK_NAMES = payloads.TOOL_NAMES
RESULT_BYTES = 80
MESSAGE_BYTES = 70


def _run_events(run_id: str, n: int, k: int) -> list[Event]:
    r = payloads.rng("archive", k)
    question = payloads.message(r, MESSAGE_BYTES, "user")
    data: list[EventData] = [RunStarted("bench", "1", {"q": question["content"]}, "sync", "fp")]
    i = 0
    while len(data) < n - 1:
        key = f"{run_id}:{i}"
        name = TASK_NAMES[(k + i) % len(TASK_NAMES)]
        data.append(TaskStarted(key, name, f"step{i}", i, 0, 0))
        result = payloads.tool_result(r, name, RESULT_BYTES)
        data.append(TaskCompleted(key, result, float((k * 7 + i * 13) % 500)))
        reply = payloads.message(r, MESSAGE_BYTES, "assistant")
        data.append(StepCompleted(f"step{i}", i, 0, {"messages": [reply]}))
        i += 1
    answer = payloads.message(r, MESSAGE_BYTES, "assistant")
    data = [*data[: n - 1], RunCompleted({"answer": answer["content"]})]
    return [
        Event(run_id, s + 1, d, T0 + timedelta(milliseconds=s * 10), 1) for s, d in enumerate(data)
    ]


async def _fill(log: object, runs: int) -> int:
    total = 0
    for k in range(runs):
        run_id = f"run-{k:07d}"
        await log.claim_writer(run_id)  # type: ignore[attr-defined]
        events = _run_events(run_id, EVENTS_PER_RUN, k)
        await log.append(events)  # type: ignore[attr-defined]
        total += len(events)
    return total


def _archive_throughput(runs: int, store_factory: object, label: str) -> Row:
    async def go() -> tuple[float, int, int]:
        log = MemoryEventLog()
        events = await _fill(log, runs)
        store = store_factory()  # type: ignore[operator]
        start = time.perf_counter()
        summary = await Archiver(log, store, ArchiverConfig()).run(now=T0 + timedelta(days=30))
        elapsed = time.perf_counter() - start
        assert summary.events == events
        return elapsed, events, summary.bytes_after

    elapsed, events, size = asyncio.run(go())
    return row_from_samples(
        AREA,
        f"archive throughput ({label})",
        [elapsed],
        unit="s",
        events=events,
        events_per_s=events / elapsed,
        parquet_bytes=size,
        target=">= 200,000 events/s (local)",
    )


@contextlib.contextmanager
def _moto() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    exe = shutil.which("moto_server") or "moto_server"
    proc = subprocess.Popen(
        [exe, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


def _synthetic_archive(folder: Path, total_events: int) -> tuple[LocalArchiveStore, str]:
    """``total_events`` in Parquet via the writer: one real chunk, copied with new run ids."""
    store = LocalArchiveStore(folder)
    chunk_runs = min(10_000, max(1, total_events // EVENTS_PER_RUN))
    events = [e for k in range(chunk_runs) for e in _run_events(f"c{k:06d}", EVENTS_PER_RUN, k)]
    base = events_to_table(events, workflow="bench", version="1")
    files = max(1, total_events // base.num_rows)
    run_col = base.schema.get_field_index("run_id")
    target = ""
    for f in range(files):
        run_ids = pc.binary_join_element_wise(
            pa.scalar(f"f{f:03d}-"), base.column("run_id"), pa.scalar("")
        )
        table = base.set_column(run_col, "run_id", run_ids)
        raw = encode_parquet(table)
        key = f"workflow=bench/day=2024-03-{f % 28 + 1:02d}/part-f{f:03d}.parquet"
        store.put(key, raw)
        segments = tuple(
            Segment(f"f{f:03d}-c{k:06d}", 1, EVENTS_PER_RUN, "bench", "1", "completed")
            for k in range(chunk_runs)
        )
        entry = ManifestEntry(key, table.num_rows, len(raw), "bench", "2024-03-01", "", segments)
        store.put(entry.key, entry.to_json())
        if f == files // 2:
            target = f"f{f:03d}-c{chunk_runs // 2:06d}"
    return store, target


def _sql_rows(total_events: int) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        store, target = _synthetic_archive(Path(tmp), total_events)
        build = time.perf_counter() - start
        db = asyncio.run(open_sql(store))
        try:
            n = db.sql("SELECT count(*) FROM events").fetchone()[0]
            queries = {
                "count by type": ("SELECT type, count(*) FROM events GROUP BY type", None, "< 1 s"),
                "one run's timeline": (
                    "SELECT seq, type, ts, step FROM events WHERE run_id = ? ORDER BY seq",
                    [target],
                    "< 100 ms",
                ),
                "p95 task duration by name (events)": (
                    "SELECT task_name, quantile_cont(duration_ms, 0.95) FROM events "
                    "WHERE type = 'TaskCompleted' GROUP BY task_name",
                    None,
                    "< 1 s",
                ),
                "p95 task duration by name (tasks view)": (
                    "SELECT name, quantile_cont(duration_ms, 0.95) FROM tasks GROUP BY name",
                    None,
                    "< 1 s",
                ),
            }
            for name, (sql, params, target_text) in queries.items():
                samples = time_calls(
                    lambda sql=sql, params=params: db.arrow(sql, params), repeat=5, warmup=1
                )
                rows.append(
                    row_from_samples(AREA, f"sql {name}", samples, events=n, target=target_text)
                )
        finally:
            db.close()
        rows.append(Row(AREA, "synthetic archive build", "s", build, None, {"events": n}))
    return rows


def _file_bytes(folder: Path, prefix: str) -> int:
    """The size of the SQLite file with its -wal and -shm companions."""
    return sum(p.stat().st_size for p in folder.iterdir() if p.name.startswith(prefix))


def _bytes_per_event(runs: int) -> Row:
    from agentlog.eventlog.sqlite._log import SqliteEventLog

    async def go(tmp: Path) -> tuple[int, int, int]:
        log = SqliteEventLog(tmp / "hot.db")
        events = await _fill(log, runs)
        await log.close()
        sqlite_bytes = _file_bytes(tmp, "hot.db")
        log = SqliteEventLog(tmp / "hot.db")
        summary = await Archiver(log, LocalArchiveStore(tmp / "arch")).run(
            now=T0 + timedelta(days=30)
        )
        await log.close()
        return events, sqlite_bytes, summary.bytes_after

    with tempfile.TemporaryDirectory() as tmp:
        events, sqlite_bytes, parquet_bytes = asyncio.run(go(Path(tmp)))
    ratio = parquet_bytes / sqlite_bytes
    return Row(
        AREA,
        "bytes per event: parquet vs sqlite",
        "B/event",
        parquet_bytes / events,
        None,
        {
            "sqlite_b_per_event": sqlite_bytes / events,
            "ratio": ratio,
            "events": events,
            "target": "ratio <= 0.333",
        },
    )


def collect(quick: bool) -> list[Row]:
    """Every archive benchmark row (``quick``: ~100k events)."""
    runs = 1_000 if quick else 5_000
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        counter = iter(range(1000))
        rows.append(
            _archive_throughput(
                runs, lambda: LocalArchiveStore(Path(tmp) / f"a{next(counter)}"), "local parquet"
            )
        )
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    with _moto() as endpoint:
        import boto3

        boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
        ).create_bucket(Bucket="bench")
        rows.append(
            _archive_throughput(
                runs,
                lambda: S3ArchiveStore(
                    S3Config(
                        "bench",
                        "archive",
                        endpoint_url=endpoint,
                        region="us-east-1",
                        access_key_id="bench",
                        secret_access_key="bench",
                    )
                ),
                "s3 moto loopback",
            )
        )
    rows.extend(_sql_rows(100_000 if quick else 10_000_000))
    rows.append(_bytes_per_event(runs))
    return rows
