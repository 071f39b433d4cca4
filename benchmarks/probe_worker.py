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
top allocations still held (tracemalloc, ``<prefix>.<pid>.mem.txt``, when
``<PROFILE_ENV>_MEM`` is set too: slow). ``HELD_ENV`` names another prefix: the
worker then writes, when it stops, the bytes its Kafka log holds per run in each
of its per-run structures (``<prefix>.<pid>.held.json``), with no profiler.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import signal
import sys
import time
import tracemalloc
import types
from datetime import datetime
from pathlib import Path
from typing import Any

from agentlog.runtime import Runtime, RuntimeConfig, WorkerConfig
from benchmarks import fleet_app

__all__ = ["HELD_ENV", "PROFILE_ENV", "STATS_ENV", "STATS_EVERY_S", "main"]

#: The environment variable naming the JSON file the probe rewrites.
STATS_ENV = "AGENTLOG_BENCH_STATS"
#: The environment variable naming a file prefix for a CPU profile and an allocation report.
PROFILE_ENV = "AGENTLOG_BENCH_PROFILE"
#: The environment variable naming a file prefix for the per-run structures' bytes.
HELD_ENV = "AGENTLOG_BENCH_HELD"
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
            _held(rt)
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


def _deep_bytes(root: Any, seen: set[int]) -> int:
    """The bytes of ``root`` and everything it holds that ``seen`` does not have yet."""
    total, stack = 0, [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type | types.ModuleType | types.FunctionType):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, list | tuple | set | frozenset):
            stack.extend(obj)
        elif not isinstance(obj, str | bytes | int | float | bool | datetime):
            for name in getattr(type(obj), "__slots__", ()):
                if hasattr(obj, name):
                    stack.append(getattr(obj, name))
            if hasattr(obj, "__dict__"):
                stack.append(vars(obj))
    return total


def _rss_kb() -> int:
    resident = int(Path("/proc/self/statm").read_text().split()[1])
    return resident * os.sysconf("SC_PAGESIZE") // 1024


def _held(runtime: Runtime) -> None:
    """Write the bytes of the log's per-run structures (see the module docstring)."""
    prefix = os.environ.get(HELD_ENV)
    log: Any = runtime.log
    member = getattr(log, "member", None)
    if not prefix or member is None:
        return
    owners = list(member.owners.values())
    reader = log._reader
    seen: set[int] = set()
    parts = {
        "tails": [o.tails for o in owners],
        "live": [o.live for o in owners],
        "recent": [o.recent for o in owners],
        "reader_index": reader._index,
        "reader_runs_on": reader._runs_on,
        "reader_snapshots": reader._snaps,
        "reader_points": reader._points,
        "command_buffer": member._buffer,
        "commands_outstanding": [o.commands for o in owners],
    }
    held = {name: _deep_bytes(value, seen) for name, value in parts.items()}
    report = {
        "runs": sum(len(o.tails) for o in owners),
        "live": sum(len(o.live) for o in owners),
        "rss_kb": _rss_kb(),
        "bytes": held,
    }
    Path(f"{prefix}.{os.getpid()}.held.json").write_text(json.dumps(report, indent=1))


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
