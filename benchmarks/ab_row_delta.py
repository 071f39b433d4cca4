"""A/B of the run row's delta (issue 23 items 6 and 7, session 33), in one process.

Usage (from the repo root)::

    python -m benchmarks.ab_row_delta [PAIRS] [DURABLE_PAIRS] [ROUNDS]

``delta`` is the SQLite log as it is: a step's events write the run index
row as a delta of the row the log remembers
(:func:`~agentlog.eventlog._row_format.row_after_steps`). ``full`` is the
same code with the delta switched off, so every append takes the full rules
(``RunInfo.after`` and ``info_to_row``), as before session 33. Both run in
this process, alternating per call, each on its own log file (so that each
log's remembered rows are its own path's):

1. CPU (``time.process_time``) and wall time of one lone non-durable append
   (``durable=False``: no fsync, so the disk hides nothing), PAIRS pairs;
2. a durable append's median against a raw INSERT+COMMIT with the same
   pragmas, schema and payload, taken in turn (raw, delta, full), DURABLE_PAIRS
   triples;
3. 100 runs x 50 sync steps (``bench_group_commit``'s round), ROUNDS rounds
   of each, alternating: steps/s and the CPU of the process per step.

The load average is printed with each part.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from agentlog.eventlog.codec import encode_payload
from agentlog.eventlog.sqlite import SqliteEventLog, _append_batch
from agentlog.eventlog.sqlite._schema import MIGRATIONS
from benchmarks import bench_eventlog, bench_group_commit

_CACHE = Path(__file__).resolve().parent.parent / ".cache" / "bench"
_DELTA = _append_batch.row_after_steps


@contextmanager
def _mode(mode: str) -> Iterator[None]:
    """``full``: the delta switched off for what runs inside."""
    if mode == "full":
        _append_batch.row_after_steps = lambda *_: None  # type: ignore[assignment]
    try:
        yield
    finally:
        _append_batch.row_after_steps = _DELTA


def _load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


@asynccontextmanager
async def _two_logs(
    folder: Path, prefix: str, count: int, warm: int, *, durable: bool
) -> AsyncIterator[tuple[dict[str, SqliteEventLog], dict[str, list[Any]]]]:
    """The delta and the full log side by side, each with ``count`` events of
    one run, its first ``warm`` appended (the row known, statements cached)."""
    async with (
        SqliteEventLog(folder / f"{prefix}delta.db") as delta,
        SqliteEventLog(folder / f"{prefix}full.db") as full,
    ):
        logs = {"delta": delta, "full": full}
        events = {}
        for mode, log in logs.items():
            epoch = await log.claim_writer("run")
            events[mode] = bench_eventlog._events("run", count, epoch)
            with _mode(mode):
                for event in events[mode][:warm]:
                    await log.append([event], durable=durable)
        yield logs, events


async def _appends(folder: Path, pairs: int) -> None:
    cpu: dict[str, list[float]] = {"delta": [], "full": []}
    wall: dict[str, list[float]] = {"delta": [], "full": []}
    async with _two_logs(folder, "", pairs + 100, 100, durable=False) as (logs, events):
        for i in range(100, pairs + 100):
            for mode in ("delta", "full") if i % 2 else ("full", "delta"):
                with _mode(mode):
                    c, w = time.process_time(), time.perf_counter()
                    await logs[mode].append([events[mode][i]], durable=False)
                    wall[mode].append(time.perf_counter() - w)
                    cpu[mode].append(time.process_time() - c)
    for mode in ("full", "delta"):
        print(
            f"non-durable append, {mode}: CPU {sum(cpu[mode]) / pairs * 1e6:.1f} us mean, "
            f"wall {statistics.median(wall[mode]) * 1e6:.1f} us median"
        )


async def _durable(folder: Path, triples: int) -> None:
    raw = sqlite3.connect(folder / "raw.db", isolation_level=None)
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("PRAGMA synchronous=FULL")
    raw.execute(MIGRATIONS[0][0])
    times: dict[str, list[float]] = {"raw": [], "delta": [], "full": []}
    async with _two_logs(folder, "d-", triples + 1, 1, durable=True) as (logs, events):
        for i in range(1, triples + 1):
            payload = encode_payload(events["delta"][i].data)
            start = time.perf_counter()
            raw.execute("BEGIN IMMEDIATE")
            raw.execute(
                "INSERT INTO events VALUES (?,?,?,?,?,?,?)",
                ("run", i, "TaskCompleted", 1_700_000_000_000_000 + i, 1, 0, payload),
            )
            raw.execute("COMMIT")
            times["raw"].append(time.perf_counter() - start)
            for mode in ("delta", "full") if i % 2 else ("full", "delta"):
                with _mode(mode):
                    start = time.perf_counter()
                    await logs[mode].append([events[mode][i]], durable=True)
                    times[mode].append(time.perf_counter() - start)
    raw.close()
    median = {mode: statistics.median(samples) * 1e6 for mode, samples in times.items()}
    print(
        f"durable: raw {median['raw']:.0f} us, full {median['full']:.0f} us "
        f"({median['full'] / median['raw']:.2f}x raw), delta {median['delta']:.0f} us "
        f"({median['delta'] / median['raw']:.2f}x raw)"
    )


def _steps(folder: Path, rounds: int) -> None:
    for r in range(rounds):
        for mode in ("full", "delta") if r % 2 == 0 else ("delta", "full"):
            load = _load()
            with _mode(mode):
                rate, per_commit, cpu = asyncio.run(
                    bench_group_commit._runtime_round(folder / f"s-{r}-{mode}", 50)
                )
            print(
                f"100 runs x 50 sync steps, {mode} (load {load}): {rate:.0f} steps/s, "
                f"{per_commit:.1f} appends per commit, CPU {cpu:.1f} us per step"
            )


def main() -> None:
    args = [int(arg) for arg in sys.argv[1:]]
    pairs, triples, rounds = args + [2000, 400, 3][len(args) :]
    _CACHE.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="ab-delta-", dir=_CACHE))
    try:
        print(f"load {_load()}")
        asyncio.run(_appends(folder, pairs))
        print(f"load {_load()}")
        asyncio.run(_durable(folder, triples))
        print(f"load {_load()}")
        for r in range(rounds):
            (folder / f"s-{r}-full").mkdir()
            (folder / f"s-{r}-delta").mkdir()
        _steps(folder, rounds)
        print(f"load {_load()}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
