"""Redis backend benchmarks, against a real redis-server.

Uses ``REDIS_URL`` when set (a server with ``appendonly yes`` and
``appendfsync always``); otherwise starts ``redis-server`` in a temporary
folder with that configuration (tests/services/redis_server.py) and stops it
at the end. Rows:

* ``sync append``: one event per step, ``durable=True`` (with ``appendfsync
  always`` the server fsyncs before it replies), p50/p99, against a raw
  redis-py XADD of the same fields to a stream on the same server, so with
  the same fsync policy, in the same run (target p50 ratio <= 1.5);
* ``throughput``: durable appends of 50 events across 100 concurrent runs
  (events/s).

Each event is a TaskCompleted whose result is a realistic tool result of
:data:`benchmarks.payloads.PAYLOAD_BYTES`, the size every backend's benchmark
stores (:func:`benchmarks.harness.task_events`). The throughput row's median
and p99 are of each append's latency; its rate is events over the wall time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import redis.asyncio as aioredis

from agentlog.eventlog import Event, open_log
from agentlog.eventlog._row_format import event_row
from agentlog.eventlog.redis import RedisEventLog
from benchmarks.harness import Row, row_from_samples, task_events

AREA = "redis"


def _events(run_id: str, first: int, count: int, epoch: int = 0) -> list[Event]:
    """Events ``first`` .. ``first + count - 1`` of a run: the same for the same arguments."""
    return task_events(AREA, run_id, first, count, epoch)


@contextlib.contextmanager
def _server() -> Iterator[str]:
    """The URL of REDIS_URL's server, or of one started here and stopped after."""
    given = os.environ.get("REDIS_URL", "").strip()
    if given:
        yield given
        return
    from tests.services.redis_server import DURABLE_CONFIG, start_server, stop_server

    with tempfile.TemporaryDirectory(prefix="agentlog-redis-bench-") as folder:
        server = start_server(Path(folder), DURABLE_CONFIG)
        try:
            yield server.url()
        finally:
            stop_server(server)


async def _open(url: str) -> RedisEventLog:
    sep = "&" if "?" in url else "?"
    log = await open_log(f"{url}{sep}prefix=bench{uuid.uuid4().hex[:8]}")
    assert isinstance(log, RedisEventLog)
    return log


async def _sync_append(url: str, steps: int) -> list[Row]:
    async with await _open(url) as log:
        epoch = await log.claim_writer("sync")
        raw = aioredis.Redis.from_url(url.split("?")[0])
        stream = f"{log.config.prefix}:raw"
        ours: list[float] = []
        raw_samples: list[float] = []
        try:
            for event in _events("sync", 1, steps + 10, epoch):
                _, seq, kind, ts, schema_v, _, payload, checksum = event_row(event, epoch, None)
                fields = {"t": kind, "ts": ts, "v": schema_v, "e": epoch, "p": payload}
                fields["c"] = checksum
                start = time.perf_counter()
                await log.append([event])
                middle = time.perf_counter()
                await raw.xadd(stream, fields, id=f"{seq}-0")
                end = time.perf_counter()
                if seq > 10:  # warm-up
                    ours.append(middle - start)
                    raw_samples.append(end - middle)
        finally:
            await raw.aclose()
    ratio = statistics.median(ours) / statistics.median(raw_samples)
    return [
        row_from_samples(
            AREA,
            f"sync append, 1 event/step ({log.durability})",
            ours,
            steps=steps,
            p50_ratio_vs_raw=ratio,
            target="ratio<=1.5",
        ),
        row_from_samples(AREA, "raw redis-py XADD, same fsync", raw_samples, steps=steps),
    ]


async def _throughput(url: str, runs: int, per_run: int) -> Row:
    batch = 50
    async with await _open(url) as log:
        plans = {
            f"run-{i}": [
                _events(f"run-{i}", first, batch) for first in range(1, per_run + 1, batch)
            ]
            for i in range(runs)
        }

        appends: list[float] = []

        async def drive(batches: list[list[Event]]) -> None:
            for events in batches:
                began = time.perf_counter()
                await log.append(events)
                appends.append(time.perf_counter() - began)

        start = time.perf_counter()
        await asyncio.gather(*(drive(p) for p in plans.values()))
        elapsed = time.perf_counter() - start
    events = runs * per_run
    return row_from_samples(
        AREA,
        f"throughput, {runs} concurrent runs, {batch} events/append, durable (time per append)",
        appends,
        events=events,
        events_per_s=events / elapsed,
    )


async def _all(url: str, quick: bool) -> list[Row]:
    rows = await _sync_append(url, 30 if quick else 300)
    rows.append(await _throughput(url, 100, 200 if quick else 1000))
    return rows


def collect(quick: bool) -> list[Row]:
    """Run the Redis benchmarks; start a server unless REDIS_URL is set."""
    with _server() as url:
        return asyncio.run(_all(url, quick))
