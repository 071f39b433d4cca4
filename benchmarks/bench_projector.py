"""Resume (load) time of one run by history length, with and without snapshots, cold and warm.

The run's events update a bounded state (a counter and a field holding a
chat message of :data:`benchmarks.payloads.PAYLOAD_BYTES`, different at every
step), so the figures measure history length, not state size. The loads run
in a fresh subprocess, which reports its timings and its peak RSS: with
snapshots, memory is bounded by snapshot + tail.

Cold and warm are reported apart, as a real resume sees the cold one:

* **cold**: the first ``load_state`` on a new EventLog instance on the file
  (opening the instance is timed apart, ``open_ms``); the first such load of
  the subprocess is also the first in a fresh process (``first_in_process_ms``);
* **warm**: the loads after it on the same instance.

The file is in the OS page cache in both (it was just written): neither is a
cold disk read.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from agentlog.eventlog import Event, RunStarted, StepCompleted, SuperstepCommitted, open_log
from agentlog.projector import fold, save_state
from benchmarks import payloads
from benchmarks.harness import Row, row_from_samples

AREA = "projector"
ROOT = Path(__file__).resolve().parent.parent / ".cache" / "bench"
SNAPSHOT_EVERY = 200

_LOADER = """
import asyncio, json, sys, time
from agentlog.eventlog import open_log
from agentlog.projector import load_state

async def main(path, use_snapshots, cold, warm):
    opens, cold_s, warm_s = [], [], []
    for _ in range(cold):
        started = time.perf_counter()
        log = await open_log("sqlite:///" + path)
        opened = time.perf_counter()
        state = await load_state(log, "bench", use_snapshots=use_snapshots)
        opens.append(opened - started)
        cold_s.append(time.perf_counter() - opened)
        for _ in range(warm):
            started = time.perf_counter()
            state = await load_state(log, "bench", use_snapshots=use_snapshots)
            warm_s.append(time.perf_counter() - started)
        await log.close()
    # VmHWM is this process image's peak; ru_maxrss would carry the parent's over
    # from fork
    status = open("/proc/self/status").read()
    rss_mb = int(status.split("VmHWM:")[1].split()[0]) / 1024
    print(json.dumps({"open": opens, "cold": cold_s, "warm": warm_s, "seq": state.seq,
                      "rss_mb": rss_mb}))

asyncio.run(main(sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), int(sys.argv[4])))
"""


def _events(count: int) -> list[Event]:
    events = [Event("bench", 1, RunStarted("bench", "1", {}, "async", "fp", start=["s"]))]
    seq, superstep = 2, 0
    r = payloads.rng("projector")
    while seq <= count:
        last = payloads.conversation_message(r, superstep, payloads.PAYLOAD_BYTES)
        writes = {"counter": superstep, "last": last}
        events.append(Event("bench", seq, StepCompleted("s", superstep, 0, writes, ["s"])))
        if seq + 1 <= count:
            events.append(Event("bench", seq + 1, SuperstepCommitted(superstep, ["s"])))
        seq, superstep = seq + 2, superstep + 1
    return events


async def _build(path: Path, count: int) -> None:
    log = await open_log(f"sqlite:///{path}")
    events = _events(count)
    for start in range(0, count, 5000):
        await log.append(events[start : start + 5000], durable=False)
    # the runtime's policy: a snapshot every SNAPSHOT_EVERY events; the load
    # then reads a tail of half an interval
    await save_state(log, fold(events[: count - SNAPSHOT_EVERY // 2]))
    await log.close()
    with sqlite3.connect(path) as conn:  # a resumed run meets a checkpointed file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _load(path: Path, use_snapshots: bool, cold: int, warm: int) -> dict[str, Any]:
    """Run the loader in a fresh process: ``cold`` new instances, ``warm`` loads after each."""
    flag = "1" if use_snapshots else "0"
    done = subprocess.run(
        [sys.executable, "-c", _LOADER, str(path), flag, str(cold), str(warm)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _repeats(size: int, use_snapshots: bool) -> tuple[int, int]:
    """(cold instances, warm loads after each): fewer where one full fold takes seconds."""
    if use_snapshots or size <= 10_000:
        return 5, 5
    return (2, 2) if size <= 100_000 else (1, 1)


def load_rows(size: int, label: str, result: dict[str, Any]) -> list[Row]:
    """The cold and the warm row of one size and mode, from the loader's result."""
    what = f"load run of {size:,} events, {label}"
    rss = round(float(result["rss_mb"]), 1)
    cold, warm = list(result["cold"]), list(result["warm"])
    return [
        row_from_samples(
            AREA,
            f"{what}, cold (new EventLog instance, first load)",
            cold,
            open_ms=round(statistics.median(result["open"]) * 1e3, 3),
            first_in_process_ms=round(cold[0] * 1e3, 3),
            peak_rss_MB=rss,
        ),
        row_from_samples(
            AREA,
            f"{what}, warm (same instance)",
            warm,
            x_cold=round(statistics.median(cold) / statistics.median(warm), 2),
            peak_rss_MB=rss,
        ),
    ]


def collect(quick: bool) -> list[Row]:
    """Load time per history length (see the module docstring)."""
    sizes = (1_000, 10_000, 100_000) if quick else (1_000, 10_000, 100_000, 1_000_000)
    ROOT.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=ROOT))
    rows: list[Row] = []
    try:
        for size in sizes:
            path = folder / f"run-{size}.db"
            asyncio.run(_build(path, size))
            for use_snapshots in (True, False):
                result = _load(path, use_snapshots, *_repeats(size, use_snapshots))
                label = "snapshot + tail" if use_snapshots else "full fold"
                rows.extend(load_rows(size, label, result))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return rows
