"""Resume (load) time of one run by history length, with and without snapshots.

The run's events update a bounded state (a counter and a field holding about
100 bytes of random words from ``benchmarks/payloads.py``, different at every
step), so the figures measure history length, not state size. Each load runs in a fresh
subprocess, which reports its timings and its peak RSS: with snapshots,
memory is bounded by snapshot + tail.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from agentlog.eventlog.events import Event, RunStarted, StepCompleted, SuperstepCommitted
from agentlog.eventlog.sqlite._log import SqliteEventLog
from agentlog.projector import fold, save_state
from benchmarks import payloads
from benchmarks.harness import Row, row_from_samples

AREA = "projector"
ROOT = Path(__file__).resolve().parent.parent / ".cache" / "bench"
SNAPSHOT_EVERY = 200

_LOADER = """
import asyncio, json, sys, time
from agentlog.eventlog.sqlite._log import SqliteEventLog
from agentlog.projector import load_state

async def main(path, use_snapshots, repeat):
    log = SqliteEventLog(path)
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        state = await load_state(log, "bench", use_snapshots=use_snapshots)
        samples.append(time.perf_counter() - started)
    await log.close()
    # VmHWM is this process image's peak; ru_maxrss would carry the parent's over
    # from fork
    status = open("/proc/self/status").read()
    rss_mb = int(status.split("VmHWM:")[1].split()[0]) / 1024
    print(json.dumps({"samples": samples, "seq": state.seq, "rss_mb": rss_mb}))

asyncio.run(main(sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])))
"""


def _events(count: int) -> list[Event]:
    events = [Event("bench", 1, RunStarted("bench", "1", {}, "async", "fp", start=["s"]))]
    seq, superstep = 2, 0
    r = payloads.rng("projector")
    while seq <= count:
        writes = {"counter": superstep, "last": payloads.text(r, 100)}
        events.append(Event("bench", seq, StepCompleted("s", superstep, 0, writes, ["s"])))
        if seq + 1 <= count:
            events.append(Event("bench", seq + 1, SuperstepCommitted(superstep, ["s"])))
        seq, superstep = seq + 2, superstep + 1
    return events


async def _build(path: Path, count: int) -> None:
    log = SqliteEventLog(str(path))
    events = _events(count)
    for start in range(0, count, 5000):
        await log.append(events[start : start + 5000], durable=False)
    # the runtime's policy: a snapshot every SNAPSHOT_EVERY events; the load
    # then reads a tail of half an interval
    await save_state(log, fold(events[: count - SNAPSHOT_EVERY // 2]))
    await log.close()
    with sqlite3.connect(path) as conn:  # a resumed run meets a checkpointed file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _load(path: Path, use_snapshots: bool, repeat: int) -> dict[str, float | list[float]]:
    flag = "1" if use_snapshots else "0"
    done = subprocess.run(
        [sys.executable, "-c", _LOADER, str(path), flag, str(repeat)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def collect(quick: bool) -> list[Row]:
    """Load time per history length (see the module docstring)."""
    sizes = (1_000, 10_000, 100_000) if quick else (1_000, 10_000, 100_000, 1_000_000)
    ROOT.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=ROOT))
    rows = []
    try:
        for size in sizes:
            path = folder / f"run-{size}.db"
            asyncio.run(_build(path, size))
            for use_snapshots in (True, False):
                repeat = 10 if use_snapshots or size <= 10_000 else 3 if size <= 100_000 else 1
                result = _load(path, use_snapshots, repeat)
                samples = result["samples"]
                assert isinstance(samples, list)
                label = "snapshot + tail" if use_snapshots else "full fold"
                rows.append(
                    row_from_samples(
                        AREA,
                        f"load run of {size:,} events, {label}",
                        samples,
                        peak_rss_MB=round(float(result["rss_mb"]), 1),  # type: ignore[arg-type]
                    )
                )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return rows
