"""Archive benchmarks: archive throughput (local, S3), SQL over many events, bytes/event.

* Throughput: runs of ~100 events in a MemoryEventLog (so the hot read costs
  little and the archiver itself is measured), archived to a local folder and
  to moto_server on loopback, pruning included.
* SQL: ``quick`` ~100k events, else 10M. Every event is generated, none
  copied: runs of varied length (50 to 149 events), each with its own run id,
  day, task names, durations and payloads. The quick set is archived by the
  real :class:`~agentlog.archive.Archiver` in passes of :data:`SQL_PASS_RUNS`
  runs through a fresh MemoryEventLog; the 10M set is written straight to
  Parquet by the archive's own writer (its columns, Parquet settings and
  manifest entries: :func:`_direct_pass`), in passes of
  :data:`DIRECT_PASS_RUNS` runs over two processes, because a hot log's
  append and prune would be most of a 10M build. The build is slow at 10M
  (about 20 minutes on a loaded 2-core VM: every payload is drawn at
  random), and is timed apart from the queries. The ``tasks`` view (which
  reads the archive's tasks tables) is timed beside the SQL it replaced
  (:data:`GROUPED_TASKS`, every task event grouped at query time), in one
  process over one archive.
* Bytes per event: the Parquet archive vs the same events in a SQLite hot log.

Every run is an agent's: a question, then tasks whose results are tool results
and steps that each append a chat message, every payload of
:data:`benchmarks.payloads.PAYLOAD_BYTES` (the size every backend's benchmark
stores) and all different, so that Parquet's zstd gains only what it would
gain on real agents' data.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agentlog.archive import (
    Archiver,
    ArchiverConfig,
    ArchiveStore,
    LocalArchiveStore,
    S3ArchiveStore,
    S3Config,
    open_sql,
)
from agentlog.archive._parquet import ManifestEntry, Segment, encode_parquet, file_key
from agentlog.archive._rows import Columns
from agentlog.archive._tasks_table import encode_tasks, tasks_key
from agentlog.eventlog import (
    Event,
    EventData,
    EventLog,
    MemoryEventLog,
    RunCompleted,
    RunStarted,
    StepCompleted,
    TaskCompleted,
    TaskStarted,
    open_log,
)
from agentlog.eventlog.events import RunStatus
from benchmarks import payloads
from benchmarks.harness import Row, row_from_samples, time_calls

AREA = "archive"
T0 = datetime(2024, 3, 1, tzinfo=UTC)
#: The archiver's clock: every run above is finished and past its retention window by then.
NOW = T0 + timedelta(days=60)
EVENTS_PER_RUN = 100
TASK_NAMES = payloads.TOOL_NAMES
#: Runs generated and archived per pass of the SQL set's build (~100k events).
SQL_PASS_RUNS = 1_000
#: Runs per pass of the 10M set, written straight to Parquet: 28 files of
#: about 36,000 events (one a day), as the archiver writes a 1M-event backlog.
DIRECT_PASS_RUNS = 10_080


def run_id(k: int) -> str:
    """The id of the ``k``-th generated run."""
    return f"run-{k:08d}"


def run_length(k: int) -> int:
    """Events of the ``k``-th run of the SQL set: 50 to 149, about 100 on average."""
    return EVENTS_PER_RUN // 2 + (k * 7_919) % EVENTS_PER_RUN


def _run_events(run_id: str, n: int, k: int) -> list[Event]:
    """The ``n`` events of run ``k``, on day ``k % 28`` of March 2024: all its own."""
    size = payloads.PAYLOAD_BYTES
    r = payloads.rng("archive", k)
    question = payloads.message(r, size, "user")
    data: list[EventData] = [RunStarted("bench", "1", {"q": question["content"]}, "sync", "fp")]
    i = 0
    while len(data) < n - 1:
        key = f"{run_id}:{i}"
        name = TASK_NAMES[(k + i) % len(TASK_NAMES)]
        data.append(TaskStarted(key, name, f"step{i}", i, 0, 0))
        result = payloads.tool_result(r, name, size)
        data.append(TaskCompleted(key, result, float((k * 7 + i * 13) % 500)))
        reply = payloads.message(r, size, "assistant")
        data.append(StepCompleted(f"step{i}", i, 0, {"messages": [reply]}))
        i += 1
    answer = payloads.message(r, size, "assistant")
    data = [*data[: n - 1], RunCompleted({"answer": answer["content"]})]
    day = T0 + timedelta(days=k % 28)
    return [
        Event(run_id, s + 1, d, day + timedelta(milliseconds=s * 10), 1) for s, d in enumerate(data)
    ]


async def _fill(log: EventLog, runs: Iterable[int], length: Callable[[int], int]) -> int:
    """Append runs ``runs`` (each ``length(k)`` events long) to ``log``; the event count."""
    total = 0
    for k in runs:
        await log.claim_writer(run_id(k))
        events = _run_events(run_id(k), length(k), k)
        await log.append(events)
        total += len(events)
    return total


def _fixed_length(_k: int) -> int:
    return EVENTS_PER_RUN


def _archive_throughput(runs: int, store_factory: Callable[[], ArchiveStore], label: str) -> Row:
    async def go() -> tuple[float, int, int]:
        log = MemoryEventLog()
        events = await _fill(log, range(runs), _fixed_length)
        store = store_factory()
        start = time.perf_counter()
        summary = await Archiver(log, store, ArchiverConfig()).run(now=NOW)
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


async def _generated_archive(folder: Path, total_events: int) -> tuple[LocalArchiveStore, str]:
    """About ``total_events`` generated events archived into ``folder``, and a run in the middle.

    Passes of :data:`SQL_PASS_RUNS` runs each go through a fresh MemoryEventLog
    and the real archiver, so that only one pass's events are held at a time.
    """
    store = LocalArchiveStore(folder)
    runs = max(1, total_events // EVENTS_PER_RUN)
    for first in range(0, runs, SQL_PASS_RUNS):
        log = MemoryEventLog()
        await _fill(log, range(first, min(runs, first + SQL_PASS_RUNS)), run_length)
        await Archiver(log, store, ArchiverConfig()).run(now=NOW)
        await log.close()
    return store, run_id(runs // 2)


def _direct_pass(folder: str, first: int, last: int) -> int:
    """Runs ``first`` to ``last - 1`` drawn and written straight to Parquet by the
    archive's writer (its columns, Parquet settings and manifest entries), one
    file per day, as one archive pass over that backlog would write them; the
    event count. No hot log: at 10M events its append and prune would be most
    of the build, and they are measured apart."""
    store = LocalArchiveStore(Path(folder))
    by_day: dict[int, list[int]] = {}
    for k in range(first, last):
        by_day.setdefault(k % 28, []).append(k)
    total = 0
    for day, ks in sorted(by_day.items()):
        columns, segments = Columns(), []
        for k in ks:
            events = _run_events(run_id(k), run_length(k), k)
            for event in events:
                columns.add_event(event, None, "bench", "1")
            segments.append(
                Segment.of(
                    events,
                    workflow="bench",
                    version="1",
                    status=RunStatus.RUNNING,
                    steps=0,
                    started_at=events[0].ts,
                )
            )
        table = columns.table()
        raw = encode_parquet(table, row_group_size=ArchiverConfig().row_group_size)
        when = (T0 + timedelta(days=day)).date().isoformat()
        key = file_key("bench", when, segments)
        store.put(key, raw)
        tasks = encode_tasks(table, row_group_size=ArchiverConfig().row_group_size)
        store.put(tasks_key(key), tasks)
        entry = ManifestEntry(
            key,
            len(table),
            len(raw),
            "bench",
            when,
            NOW.isoformat(),
            tuple(segments),
            tasks_key(key),
        )
        store.put(entry.key, entry.to_json())
        total += len(table)
    return total


def _direct_archive(folder: Path, total_events: int) -> tuple[LocalArchiveStore, str]:
    """About ``total_events`` generated events written straight to Parquet, in
    passes of :data:`DIRECT_PASS_RUNS` runs spread over two processes."""
    runs = max(1, total_events // EVENTS_PER_RUN)
    passes = [
        (str(folder), a, min(runs, a + DIRECT_PASS_RUNS)) for a in range(0, runs, DIRECT_PASS_RUNS)
    ]
    with concurrent.futures.ProcessPoolExecutor(max_workers=2) as pool:
        list(pool.map(_direct_pass, *zip(*passes, strict=True)))
    return LocalArchiveStore(folder), run_id(runs // 2)


#: What the ``tasks`` view grouped at query time before the archive kept tasks
#: tables: every task event of every file, compared with the view in one process.
GROUPED_TASKS = """
SELECT run_id, task_key AS key,
       any_value(task_name) FILTER (WHERE type = 'TaskStarted') AS name,
       any_value(step) FILTER (WHERE type = 'TaskStarted') AS step,
       count(*) FILTER (WHERE type = 'TaskStarted') AS attempts,
       CASE arg_max(type, seq) FILTER (WHERE type <> 'TaskStarted')
            WHEN 'TaskCompleted' THEN 'completed' WHEN 'TaskFailed' THEN 'failed'
            ELSE 'pending' END AS status,
       min(ts) FILTER (WHERE type = 'TaskStarted') AS started,
       max(ts) FILTER (WHERE type <> 'TaskStarted') AS ended,
       coalesce(nullif(arg_max(duration_ms, seq) FILTER (WHERE type <> 'TaskStarted'), 0),
                date_diff('microsecond', min(ts) FILTER (WHERE type = 'TaskStarted'),
                          max(ts) FILTER (WHERE type <> 'TaskStarted')) / 1000.0) AS duration_ms,
       arg_max(payload_json ->> 'error', seq) FILTER (WHERE type = 'TaskFailed') AS error
FROM events WHERE type IN ('TaskStarted', 'TaskCompleted', 'TaskFailed')
GROUP BY run_id, task_key
HAVING count(*) FILTER (WHERE type = 'TaskStarted') > 0
"""


def _sql_rows(total_events: int, *, direct: bool = False) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        if direct:
            store, target = _direct_archive(Path(tmp), total_events)
        else:
            store, target = asyncio.run(_generated_archive(Path(tmp), total_events))
        build = time.perf_counter() - start
        rows, n = sql_query_rows(store, target)
        rows.append(
            row_from_samples(
                AREA,
                "generated archive build (every event drawn, then archived)",
                [build],
                unit="s",
                events=n,
                events_per_s=round(n / build),
            )
        )
    return rows


def sql_query_rows(store: ArchiveStore, target: str, repeat: int = 5) -> tuple[list[Row], int]:
    """The SQL rows over a built archive, and its event count."""
    rows: list[Row] = []
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
            "p95 task duration by name (task events grouped, the view before tasks tables)": (
                f"SELECT name, quantile_cont(duration_ms, 0.95) FROM ({GROUPED_TASKS}) "
                "GROUP BY name",
                None,
                "",
            ),
        }
        for name, (sql, params, target_text) in queries.items():
            samples = time_calls(
                lambda sql=sql, params=params: db.arrow(sql, params), repeat=repeat, warmup=1
            )
            rows.append(
                row_from_samples(AREA, f"sql {name}", samples, events=n, target=target_text)
            )
    finally:
        db.close()
    return rows, n


def _file_bytes(folder: Path, prefix: str) -> int:
    """The size of the SQLite file with its -wal and -shm companions."""
    return sum(p.stat().st_size for p in folder.iterdir() if p.name.startswith(prefix))


def _bytes_per_event(runs: int) -> Row:
    async def go(tmp: Path) -> tuple[int, int, int]:
        log = await open_log(f"sqlite:///{tmp / 'hot.db'}")
        events = await _fill(log, range(runs), _fixed_length)
        await log.close()
        sqlite_bytes = _file_bytes(tmp, "hot.db")
        log = await open_log(f"sqlite:///{tmp / 'hot.db'}")
        summary = await Archiver(log, LocalArchiveStore(tmp / "arch")).run(now=NOW)
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
        n=1,
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
    rows.extend(_sql_rows(100_000) if quick else _sql_rows(10_000_000, direct=True))
    rows.append(_bytes_per_event(runs))
    return rows
