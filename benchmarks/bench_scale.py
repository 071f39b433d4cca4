"""Scale to more runs than a worker holds: one SQLite log with 1,000 and with
1,000,000 runs (issue 23, item 11).

Each log holds the same small live set, so a query that reads only what it
needs costs the same at both sizes and one that scans every run grows with
the log:

* ``LIVE`` running runs that no writer holds (just submitted: a worker's poll
  must find them), ``LIVE`` runs parked on a timer due in an hour, and
  ``LIVE`` runs parked on an interrupt;
* every other run finished (RunStarted, then RunCompleted), as most runs of
  a long-lived log are.

Timed at each size, through the EventLog seam a worker, the CLI and the UI
use (warm: each call is repeated after a warm-up):

* **runs page**: ``page_runs(RunQuery())``, the UI's and ``agentlog runs``'
  first page (50 rows, newest first, plus the per-status counts);
* **runs page (waiting)**: the same filtered to one status;
* **recover**: ``list_runs(status="running")``, what ``Runtime.recover``
  reads to find runs whose writer died;
* **worker poll**: ``runnable(limit=1000)`` and ``next_wake()``, what each
  worker's poll loop asks.

The ``x_vs_small`` column is the large log's median over the small log's.
The logs are built with non-durable appends (the build is not what is
measured) in a fresh folder under ``.cache`` and removed afterwards.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from agentlog.eventlog import Event, RunStatus
from agentlog.eventlog._run_pages import RunQuery
from agentlog.eventlog.events import InterruptRaised, RunCompleted, RunStarted, utcnow
from agentlog.eventlog.sqlite import SqliteEventLog
from benchmarks.harness import Row, row_from_samples

AREA = "scale"
_CACHE = Path(__file__).resolve().parent.parent / ".cache"
#: Runs of each live kind (unheld running, parked on a timer, parked on an interrupt).
LIVE = 50
#: Appends in flight while a log is built (SQLite groups them into few commits).
_IN_FLIGHT = 256


def _started(run_id: str) -> Event:
    return Event(run_id, 1, RunStarted("scale", "1", {"n": run_id}, "sync", "f"))


def _events(i: int, due: Any) -> list[Event]:
    """The events of run ``i``: the first ``3 * LIVE`` are live, the rest finished."""
    run_id = f"run-{i:08d}"
    kind = i // LIVE if i < 3 * LIVE else 3
    if kind == 0:  # submitted, not yet driven: a worker's poll finds it
        return [_started(run_id)]
    if kind == 1:  # asleep on a durable timer
        raised = InterruptRaised("s", 0, 0, 0, None, due_at=due, kind="timer")
        return [_started(run_id), Event(run_id, 2, raised)]
    if kind == 2:  # parked on a human's answer
        return [_started(run_id), Event(run_id, 2, InterruptRaised("s", 0, 0, 0, {"q": i}))]
    return [_started(run_id), Event(run_id, 2, RunCompleted({"done": i}))]


async def _build(path: str, runs: int) -> float:
    """Fill a new log with ``runs`` runs; return the seconds it took."""
    log = SqliteEventLog(path)
    due = utcnow() + timedelta(hours=1)
    started = time.perf_counter()
    try:
        pending: set[asyncio.Task[None]] = set()
        for i in range(runs):
            pending.add(asyncio.ensure_future(log.append(_events(i, due), durable=False)))
            if len(pending) >= _IN_FLIGHT:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()
            if runs >= 100_000 and i and i % 100_000 == 0:
                print(f"  scale: built {i:,} of {runs:,} runs", flush=True)
        for task in pending:
            await task
    finally:
        await log.close()
    return time.perf_counter() - started


async def _time(call: Callable[[], Awaitable[Any]], repeat: int) -> list[float]:
    for _ in range(3):
        await call()
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - began)
    return samples


async def _measure(path: str, repeat: int) -> dict[str, list[float]]:
    log = SqliteEventLog(path)
    try:
        page = await log.page_runs(RunQuery())
        assert page.total >= 3 * LIVE and len(page.rows) == 50, page.total
        due = await log.runnable(limit=1000)
        assert len(due) == LIVE, f"the poll found {len(due)} runs, not {LIVE}"

        async def poll() -> None:
            await log.runnable(limit=1000)
            await log.next_wake()

        return {
            "runs page (first 50, with counts)": await _time(
                lambda: log.page_runs(RunQuery()), repeat
            ),
            "runs page (waiting only)": await _time(
                lambda: log.page_runs(RunQuery(status=RunStatus.WAITING)), repeat
            ),
            "recover (running runs)": await _time(
                lambda: log.list_runs(status=RunStatus.RUNNING), repeat
            ),
            "worker poll (runnable + next_wake)": await _time(poll, repeat),
        }
    finally:
        await log.close()


def collect(quick: bool) -> list[Row]:
    """Measure the runs page, recover and a worker's poll at two log sizes."""
    small, large = 1_000, (100_000 if quick else 1_000_000)
    repeat = 10 if quick else 30
    _CACHE.mkdir(exist_ok=True)
    where = tempfile.mkdtemp(prefix="bench-scale-", dir=_CACHE)
    try:
        figures: dict[int, dict[str, list[float]]] = {}
        built: dict[int, float] = {}
        sizes: dict[int, int] = {}
        for runs in (small, large):
            path = os.path.join(where, f"runs-{runs}.db")
            built[runs] = asyncio.run(_build(path, runs))
            sizes[runs] = os.path.getsize(path)
            figures[runs] = asyncio.run(_measure(path, repeat))
        rows = []
        for name, big in figures[large].items():
            base = statistics.median(figures[small][name])
            for runs, samples in ((small, figures[small][name]), (large, big)):
                extra: dict[str, Any] = {"runs": runs, "live": 3 * LIVE}
                if runs == large:
                    extra["x_vs_small"] = statistics.median(samples) / base
                rows.append(row_from_samples(AREA, f"{name} @ {runs:,} runs", samples, **extra))
        for runs in (small, large):
            rows.append(
                Row(
                    AREA,
                    f"build the log @ {runs:,} runs (not durable)",
                    "s",
                    built[runs],
                    n=1,
                    extra={"runs_per_s": runs / built[runs], "file_mb": sizes[runs] / 1e6},
                )
            )
        return rows
    finally:
        shutil.rmtree(where, ignore_errors=True)
