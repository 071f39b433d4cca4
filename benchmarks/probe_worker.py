"""A worker process that also reports what its Kafka log holds, for ``bench_kafka_workers``.

``python -m benchmarks.probe_worker --log URL [--concurrency N] [--lease S] [--poll S]``
does what ``agentlog worker --app benchmarks.fleet_app:workflows`` does (the
same runtime, the same ``serve``, SIGTERM hands the runs over), and every
``STATS_EVERY_S`` it writes, as JSON to the file named by ``STATS_ENV``, the
transactional producers and the partitions its group log holds
(``transactional_producers``, ``owned_partitions``) and the highest producer
count seen so far. Those live inside the worker process; the benchmark reads
them from the file, and everything else (RSS, sockets) from ``/proc``.

For profiling, ``PROFILE_ENV`` names a file prefix: the worker then runs
under cProfile and, when it stops, writes ``<prefix>.<pid>.prof`` and the
top allocations still held (tracemalloc, ``<prefix>.<pid>.mem.txt``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import signal
import time
import tracemalloc
from pathlib import Path

from agentlog.runtime import Runtime, RuntimeConfig, WorkerConfig
from benchmarks import fleet_app

__all__ = ["PROFILE_ENV", "STATS_ENV", "STATS_EVERY_S", "main"]

#: The environment variable naming the JSON file the probe rewrites.
STATS_ENV = "AGENTLOG_BENCH_STATS"
#: The environment variable naming a file prefix for a CPU profile and an allocation report.
PROFILE_ENV = "AGENTLOG_BENCH_PROFILE"
STATS_EVERY_S = 0.5


async def _report(runtime: Runtime, path: Path) -> None:
    log = runtime.log
    peak = 0
    while True:
        producers = int(getattr(log, "transactional_producers", 0))
        owned = list(getattr(log, "owned_partitions", []))
        peak = max(peak, producers)
        stats = {"producers": producers, "peak_producers": peak, "owned_partitions": owned}
        # Replace, never truncate in place: the benchmark may read it at any time.
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps(stats))
        partial.replace(path)
        await asyncio.sleep(STATS_EVERY_S)


async def _serve(args: argparse.Namespace) -> None:
    settings = WorkerConfig(concurrency=args.concurrency, poll_seconds=args.poll)
    config = RuntimeConfig(worker=False, worker_config=settings, lease_seconds=args.lease)
    async with await Runtime.open(args.log, workflows=fleet_app.workflows, config=config) as rt:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, rt.worker.stop)
        stats = os.environ.get(STATS_ENV)
        reporter = asyncio.create_task(_report(rt, Path(stats))) if stats else None
        # Fleet.wait_ready waits for " drives ", as `agentlog worker` prints it.
        print(f"worker {rt.config.owner} drives {', '.join(sorted(rt.workflows))}", flush=True)
        try:
            await rt.serve()
            _allocations()
        finally:
            if reporter is not None:
                reporter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reporter


def _allocations() -> None:
    """Write the top allocations still held (the runtime still open), if profiling."""
    prefix = os.environ.get(PROFILE_ENV)
    if not prefix or not tracemalloc.is_tracing():
        return
    snapshot = tracemalloc.take_snapshot()
    lines = [f"traced {tracemalloc.get_traced_memory()[0]} bytes"]
    for stat in snapshot.statistics("lineno")[:40]:
        lines.append(f"{stat.size:>12} {stat.count:>9} {stat.traceback}")
    Path(f"{prefix}.{os.getpid()}.mem.txt").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> None:
    """Parse the worker options and serve until SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.probe_worker")
    parser.add_argument("--log", required=True)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--lease", type=float, default=30.0)
    parser.add_argument("--poll", type=float, default=0.2)
    args = parser.parse_args(argv)
    prefix = os.environ.get(PROFILE_ENV)
    if not prefix:
        asyncio.run(_serve(args))
        return
    if os.environ.get(PROFILE_ENV + "_MEM"):
        tracemalloc.start()
    profile = cProfile.Profile(time.process_time)  # CPU, not the waits
    profile.enable()
    try:
        asyncio.run(_serve(args))
    finally:
        profile.disable()
        profile.dump_stats(f"{prefix}.{os.getpid()}.prof")


if __name__ == "__main__":
    main()
