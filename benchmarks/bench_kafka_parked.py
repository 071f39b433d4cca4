"""Parked runs on Kafka: a worker's start-up and memory with many runs waiting
(issue 23, item 11).

One worker (``benchmarks/probe_worker.py``) in a fresh group on 12 partitions
drives N runs of ``bench-park`` (``benchmarks/fleet_app.py``) until every one
waits on a human's approval; it is stopped with SIGTERM, and a new worker
takes its place. The rows:

* **submit and park**: how long the client took to send the N commands and
  until every run was waiting (the first worker's peak RSS);
* **start-up with N parked runs**: from the new worker's spawn until it
  printed its ready line, until the group is Stable with it, and until it
  owns every partition (its stats file); its RSS then;
* **first answer after start-up**: ``resume`` of one parked run from the
  client until that run completed, the latency a human sees after a deploy.

The broker is ``KAFKA_BOOTSTRAP_SERVERS`` when set, else one started from the
Maven jars and stopped at the end.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path

from agentlog.eventlog._run_pages import RunQuery
from agentlog.eventlog.events import RunStatus
from benchmarks import fleet_app, probe_worker
from benchmarks.bench_kafka_workers import (
    PARTITIONS,
    SUBMIT_PARALLEL,
    Topics,
    kafka_broker,
    peak_rss_bytes,
)
from benchmarks.fleet import fleet, open_client, submit_all, wait_for
from benchmarks.harness import Row

AREA = "kafka-parked"


def _rss_mb(pid: int) -> float:
    return round(peak_rss_bytes(pid) / 2**20, 1)


async def parked(bootstrap: str, runs: int, in_flight: int = SUBMIT_PARALLEL) -> list[Row]:
    """Park ``runs`` runs on one worker, replace the worker, time its start-up
    (``in_flight``: the client's submits at once)."""
    topics = Topics(bootstrap, "parked")
    folder = Path(tempfile.mkdtemp(prefix="kparked-"))
    stats_file = folder / "stats.json"
    env = {probe_worker.STATS_ENV: str(stats_file)}
    command = ("-m", "benchmarks.probe_worker")
    client = await open_client(topics.client)
    inputs = [(f"park-{i:06d}", {}) for i in range(runs)]
    try:
        with fleet(topics.worker, folder, concurrency=1000, env=env, command=command) as fleet_:
            (first,) = fleet_.start(1)
            fleet_.wait_ready(timeout_s=120)
            await topics.wait_stable(1)
            started = time.perf_counter()
            submit_s = await submit_all(client, fleet_app.PARK, inputs, in_flight)

            async def all_parked() -> bool:
                # The index's counts (a status change writes the entry): no event
                # read, which at 100,000 runs would reread the events topic each poll.
                page = await client.log.page_runs(RunQuery(status=RunStatus.WAITING, limit=0))
                return page.total >= runs

            await wait_for(all_parked, 60 + runs / 20, f"{runs} runs to park", 2.0)
            park_s = time.perf_counter() - started
            first_rss = _rss_mb(first.pid)
            fleet_.close(grace_s=120)
            stats_file.unlink(missing_ok=True)

            spawned = time.perf_counter()
            (second,) = fleet_.start(1)
            fleet_.wait_ready(timeout_s=600)
            ready_s = time.perf_counter() - spawned
            await topics.wait_stable(1, timeout_s=600)
            stable_s = time.perf_counter() - spawned

            async def owns_all() -> bool:
                if not stats_file.exists():
                    return False
                owned = json.loads(stats_file.read_text())["owned_partitions"]
                return len(owned) == PARTITIONS

            await wait_for(owns_all, 600, "the new worker to own every partition", 0.1)
            owned_s = time.perf_counter() - spawned
            second_rss = _rss_mb(second.pid)

            answered = time.perf_counter()
            await client.resume(inputs[0][0], True)

            async def done() -> bool:
                info = await client.log.find_run(inputs[0][0])
                return info is not None and info.status == RunStatus.COMPLETED

            await wait_for(done, 300, "the answered run to complete", 0.02)
            answer_s = time.perf_counter() - answered
            fleet_.close(grace_s=120)
    finally:
        await client.close()
        shutil.rmtree(folder, ignore_errors=True)
    name = f"{runs:,} parked runs, 1 worker, {PARTITIONS} partitions"
    return [
        Row(
            AREA,
            f"submit and park: {name}",
            "s",
            park_s,
            n=1,
            extra={
                "submit_s": round(submit_s, 1),
                "submits_in_flight": in_flight,
                "runs_per_s": runs / park_s,
                "peak_rss_mb": first_rss,
            },
        ),
        Row(
            AREA,
            f"start-up with {name}",
            "s",
            owned_s,
            n=1,
            extra={
                "ready_line_s": round(ready_s, 2),
                "group_stable_s": round(stable_s, 2),
                "peak_rss_mb": second_rss,
            },
        ),
        Row(AREA, f"first answer after start-up: {name}", "s", answer_s, n=1),
    ]


def collect(quick: bool) -> list[Row]:
    """Run the parked-runs benchmark (see the module docstring)."""
    with kafka_broker() as bootstrap:
        return asyncio.run(parked(bootstrap, 2_000 if quick else 100_000))


if __name__ == "__main__":  # python -m benchmarks.bench_kafka_parked [RUNS [SUBMITS_IN_FLIGHT]]
    import sys

    _runs = int(sys.argv[1]) if sys.argv[1:] else 2_000
    _in_flight = int(sys.argv[2]) if sys.argv[2:] else SUBMIT_PARALLEL
    with kafka_broker() as _bootstrap:
        for _row in asyncio.run(parked(_bootstrap, _runs, _in_flight)):
            print(json.dumps({"name": _row.name, "median": _row.median, "extra": _row.extra}))
