"""A/B of the SQLite write path (issue 23 items 6 and 7), two source trees alternately.

Usage (from the repo root)::

    python -m benchmarks.ab_write_path BEFORE_SRC AFTER_SRC [ROUNDS]

Each round runs one child process per variant, in turn: ``before`` (the
package under BEFORE_SRC), ``after`` (under AFTER_SRC) and ``after-worker``
(AFTER_SRC with every group commit sent to the worker thread, as before,
``GroupCommit.inline_max = 0``) and ``after-loop`` (every group committed
on the loop's thread when the worker thread is idle). Each child measures, in one process: the
two floors (:mod:`benchmarks.floor`), raw INSERT+COMMIT on the log's schema
and a single durable append taken in turn (medians of 400 pairs), a one-run
sync step (``bench_runtime``'s loop) in blocks of 40 steps alternating with
blocks of 40 raw commits, and 100 runs x 50 sync steps and
exit-mode steps (``bench_group_commit``'s round): steps/s, appends per
commit and the CPU of the process per step. The load average is printed
beside each child.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
_CACHE = _ROOT / ".cache" / "bench"


async def _paired_appends(folder: Path, n: int) -> tuple[float, float]:
    """Medians (seconds) of a raw INSERT+COMMIT and a durable append, taken in
    turn, one of each per round, so that the disk's moods hit both alike."""
    from agentlog.eventlog.codec import encode_payload
    from agentlog.eventlog.sqlite import SqliteEventLog
    from agentlog.eventlog.sqlite._schema import MIGRATIONS
    from benchmarks import bench_eventlog

    raw = sqlite3.connect(folder / "paired-raw.db", isolation_level=None)
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("PRAGMA synchronous=FULL")
    raw.execute(MIGRATIONS[0][0])
    raw_times: list[float] = []
    log_times: list[float] = []
    async with SqliteEventLog(folder / "paired.db") as log:
        epoch = await log.claim_writer("run")
        for seq, event in enumerate(bench_eventlog._events("run", n, epoch), start=1):
            payload = encode_payload(event.data)
            start = time.perf_counter()
            raw.execute("BEGIN IMMEDIATE")
            raw.execute(
                "INSERT INTO events VALUES (?,?,?,?,?,?,?)",
                ("run", seq, "TaskCompleted", 1_700_000_000_000_000 + seq, 1, 0, payload),
            )
            raw.execute("COMMIT")
            middle = time.perf_counter()
            await log.append([event], durable=True)
            log_times.append(time.perf_counter() - middle)
            raw_times.append(middle - start)
    raw.close()
    return statistics.median(raw_times), statistics.median(log_times)


def _paired_steps(folder: Path, blocks: int, steps: int) -> tuple[float, float]:
    """Medians (seconds) of a raw INSERT+COMMIT and of a one-run sync step, in
    alternate blocks (``steps`` commits, then a run of ``steps`` steps)."""
    from benchmarks import bench_eventlog, bench_runtime

    raw_times: list[float] = []
    step_times: list[float] = []
    for block in range(blocks):
        raw_times.extend(bench_eventlog._raw_samples(str(folder / f"block-{block}.db"), steps))
        step, _bytes = asyncio.run(bench_runtime._agentlog_loop(steps, "sync"))
        step_times.append(step)
    return statistics.median(raw_times), statistics.median(step_times)


def _child(mode: str) -> dict[str, float | str]:
    from benchmarks import bench_group_commit
    from benchmarks.floor import fsync_samples, sqlite_commit_samples

    if mode in ("after-worker", "after-loop"):
        from agentlog.eventlog.sqlite._group_commit import GroupCommit

        GroupCommit.inline_max = 0 if mode == "after-worker" else 1_000_000
    import agentlog

    out: dict[str, float | str] = {"mode": mode, "agentlog": agentlog.__file__}
    out["load"] = Path("/proc/loadavg").read_text().split()[0]
    _CACHE.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="ab-write-", dir=_CACHE))
    try:
        us = 1e6
        out["floor_sqlite_us"] = statistics.median(sqlite_commit_samples(folder, 200)) * us
        out["floor_fsync_us"] = statistics.median(fsync_samples(folder, 200)) * us
        raw, append = asyncio.run(_paired_appends(folder, 400))
        out["raw_us"], out["append_us"], out["append_x_raw"] = raw * us, append * us, append / raw
        raw, step = _paired_steps(folder, 6, 40)
        out["raw2_us"], out["sync_step_us"], out["sync_step_x_raw"] = (
            raw * us,
            step * us,
            step / raw,
        )
        rate, per_commit, cpu = asyncio.run(bench_group_commit._runtime_round(folder / "s", 50))
        out["sync100_steps_s"], out["sync100_per_commit"], out["sync100_cpu_us"] = (
            rate,
            per_commit,
            cpu,
        )
        rate, _per, cpu = asyncio.run(bench_group_commit._runtime_round(folder / "e", 50, "exit"))
        out["exit100_steps_s"], out["exit100_cpu_us"] = rate, cpu
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    out["load_after"] = Path("/proc/loadavg").read_text().split()[0]
    return out


def main() -> None:
    if sys.argv[1] == "--child":
        print(json.dumps(_child(sys.argv[2])))
        return
    before, after = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    variants = [
        ("before", before),
        ("after", after),
        ("after-worker", after),
        ("after-loop", after),
    ]
    for _ in range(rounds):
        for mode, src in variants:
            env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{_ROOT}"}
            child = subprocess.run(
                [sys.executable, "-m", "benchmarks.ab_write_path", "--child", mode],
                cwd=_ROOT,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            result = json.loads(child.stdout.strip().splitlines()[-1])
            print(
                " ".join(
                    f"{key}={value:.2f}" if isinstance(value, float) else f"{key}={value}"
                    for key, value in result.items()
                    if key != "agentlog"
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
