"""The SQLite event log: per-append latency against raw sqlite3 and the disk's floor,
batch and read throughput.

Each event is a TaskCompleted whose result is a realistic tool result of
:data:`benchmarks.payloads.PAYLOAD_BYTES` (search hits, a fetched page, a
summary, a chat completion or an embedding, in turn; see
:func:`benchmarks.harness.task_events`), every one different. The raw sqlite3
side inserts the very same encoded payloads. The single append is printed
beside the physical floor measured in the same run (``benchmarks/floor.py``):
one fsync'd SQLite WAL commit of a small INSERT, and ``os.fsync`` after a
small append to a file.

Every figure is measured on files in a fresh directory under ``.cache`` in
the repository (the same disk as the code), removed afterwards.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from agentlog.eventlog import Event
from agentlog.eventlog._row_format import event_rows
from agentlog.eventlog.codec import encode_payload
from agentlog.eventlog.sqlite._append_batch import apply_batches
from agentlog.eventlog.sqlite._group_commit import PendingAppend
from agentlog.eventlog.sqlite._log import MIGRATIONS, SqliteEventLog
from benchmarks.floor import Floors
from benchmarks.harness import Row, percentile, row_from_samples, task_events

AREA = "eventlog"
_CACHE = Path(__file__).resolve().parent.parent / ".cache"


def _events(run_id: str, count: int, epoch: int = 0) -> list[Event]:
    """``count`` events of one run, seq 1 on: the benchmarks' shared task results."""
    return task_events(AREA, run_id, 1, count, epoch)


def _raw_samples(path: str, n: int) -> list[float]:
    """INSERT + COMMIT of one row with the same pragmas, schema and payload bytes."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(MIGRATIONS[0][0])  # the same events table
    rows = [encode_payload(event.data) for event in _events("run", n)]
    samples = []
    for seq, payload in enumerate(rows, start=1):
        start = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO events VALUES (?,?,?,?,?,?,?)",
            ("run", seq, "TaskCompleted", 1_700_000_000_000_000 + seq, 1, 0, payload),
        )
        conn.execute("COMMIT")
        samples.append(time.perf_counter() - start)
    conn.close()
    return samples


async def _log_samples(path: str, n: int) -> list[float]:
    async with SqliteEventLog(path) as log:
        epoch = await log.claim_writer("run")
        samples = []
        for event in _events("run", n, epoch):
            start = time.perf_counter()
            await log.append([event], durable=True)
            samples.append(time.perf_counter() - start)
        return samples


async def _inline_samples(path: str, n: int) -> list[float]:
    """The log's own statements and Python for one append, run on the caller's
    thread: the append without its group commit's scheduling (issue 23 item
    6; before session 32, without its two thread wake-ups).

    The same work as :func:`_log_samples` (encode, check, update the run
    row, insert, COMMIT with synchronous=FULL), called straight through the
    group commit's body, so the difference to it is the worker thread's hops.
    """
    async with SqliteEventLog(path) as log:
        epoch = await log.claim_writer("run")
        loop = asyncio.get_running_loop()
        known = log._group._known
        samples = []
        for event in _events("run", n, epoch):
            start = time.perf_counter()
            rows = event_rows([event], epoch, None)
            append = PendingAppend(
                [event], rows, event.seq, epoch, True, loop, loop.create_future()
            )
            errors, written = log._db.transact(
                functools.partial(apply_batches, [append], known), durable=True
            )
            assert errors == [None]
            known.update(written)
            samples.append(time.perf_counter() - start)
        return samples


async def _hop_samples(path: str, n: int) -> list[float]:
    """A no-op round trip to the log's worker thread: the floor of every call."""
    async with SqliteEventLog(path) as log:
        samples = []
        for _ in range(n):
            start = time.perf_counter()
            await log._call(int)
            samples.append(time.perf_counter() - start)
        return samples


async def _batched(
    path: str, events: list[Event], batch: int, durable: bool
) -> tuple[float, float, list[float]]:
    """Events per wall second, per CPU second of this process (both threads),
    and the seconds of each batch's append.

    The machine is shared: the CPU figure shows what the code costs when
    other processes take the cores away.
    """
    total = len(events)
    batches: list[float] = []
    async with SqliteEventLog(path) as log:
        start, cpu = time.perf_counter(), time.process_time()
        for offset in range(0, total, batch):
            began = time.perf_counter()
            await log.append(events[offset : offset + batch], durable=durable)
            batches.append(time.perf_counter() - began)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        return total / wall, total / cpu, batches


async def _read(path: str, total: int) -> tuple[float, int, float]:
    events = _events("big", total)
    async with SqliteEventLog(path) as log:
        for offset in range(0, total, 1000):
            await log.append(events[offset : offset + 1000], durable=False)
        start = time.perf_counter()
        count = 0
        async for _event_read in log.read("big"):
            count += 1
        elapsed = time.perf_counter() - start
        return count / elapsed, count, elapsed


def collect(quick: bool) -> list[Row]:
    """Measure the SQLite backend; see the module docstring."""
    _CACHE.mkdir(exist_ok=True)
    where = tempfile.mkdtemp(prefix="bench-eventlog-", dir=_CACHE)
    try:
        return _collect(where, quick)
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _collect(where: str, quick: bool) -> list[Row]:
    n = 200 if quick else 2000
    sizes = [len(encode_payload(e.data)) for e in _events("run", 100)]
    size = round(statistics.mean(sizes))
    # Alternate rounds so that disk noise hits both sides alike.
    ours: list[float] = []
    raw: list[float] = []
    inline: list[float] = []
    for round_ in range(4):
        raw += _raw_samples(os.path.join(where, f"raw{round_}.db"), n // 4)
        ours += asyncio.run(_log_samples(os.path.join(where, f"log{round_}.db"), n // 4))
        inline += asyncio.run(_inline_samples(os.path.join(where, f"in{round_}.db"), n // 4))
    ratio = statistics.median(ours) / statistics.median(raw)
    floors = Floors(AREA, Path(where), n)
    rows = [
        row_from_samples(
            AREA,
            "sqlite append 1 event, durable (WAL, synchronous=FULL)",
            ours,
            unit="us",
            payload_bytes=size,
            ratio_vs_raw=ratio,
            ratio_p99=percentile(ours, 99) / percentile(raw, 99),
            **floors.ratios(ours),
            target="ratio<=1.5",
            dir=where,
        ),
        row_from_samples(
            AREA,
            "raw sqlite3 INSERT+COMMIT (same pragmas, schema, payload)",
            raw,
            unit="us",
            payload_bytes=size,
            **floors.ratios(raw),
        ),
        row_from_samples(
            AREA,
            "the same append's statements and Python inline (no worker thread)",
            inline,
            unit="us",
            ratio_vs_raw=statistics.median(inline) / statistics.median(raw),
            **floors.ratios(inline),
            note="a lone append commits on the loop's thread too (session 32): "
            "append minus this = the group's flush and the resume",
        ),
        *floors.rows,
    ]
    rows.append(
        row_from_samples(
            AREA,
            "worker-thread round trip (no-op)",
            asyncio.run(_hop_samples(os.path.join(where, "hop.db"), n)),
            unit="us",
            note="part of every async call; cross-CPU thread wake-ups",
        )
    )
    total = 20_000 if quick else 100_000
    bulk = _events("bulk", total)
    for durable in (True, False):
        # Three fresh files each; the median of the three is the figure.
        measured = [
            asyncio.run(_batched(os.path.join(where, f"b{durable}{i}.db"), bulk, 1000, durable))
            for i in range(3)
        ]
        rates = [wall for wall, _cpu, _batches in measured]
        rows.append(
            row_from_samples(
                AREA,
                f"sqlite append, batches of 1000, durable={durable} (time per batch)",
                [s for _wall, _cpu, batches in measured for s in batches],
                events=total,
                events_per_s=statistics.median(rates),
                runs_events_per_s=", ".join(f"{r:,.0f}" for r in rates),
                per_cpu_second=statistics.median(c for _wall, c, _batches in measured),
                target="events_per_s>=100000",
            )
        )
    rate, count, elapsed = asyncio.run(
        _read(os.path.join(where, "read.db"), 10_000 if quick else 100_000)
    )
    rows.append(
        row_from_samples(
            AREA, "sqlite read one run", [elapsed], unit="s", events=count, events_per_s=rate
        )
    )
    return rows
