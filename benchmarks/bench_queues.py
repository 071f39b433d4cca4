"""Queue benchmarks: what a queue costs a worker draining a backlog on SQLite.

One in-process worker (concurrency 50) drains a backlog of N runs of a
one-step workflow, recorded first by a client, on a fresh SQLite file per
case. The cases differ only in the workflow's queue:

* ``none``: no queue (the baseline);
* ``concurrency``: ``Queue(concurrency=50)``, a limit the worker never
  reaches, so the figure is the cost of reading the queue and admitting
  (``RunAdmitted``), not of waiting;
* ``rate``: the same plus ``Rate(10**6, per=1 minute)``, a rate never
  reached: adds the page of runs admitted within the period;
* ``priority``: ``concurrency`` with every run submitted at a priority
  (0-9), so the queue is read best first.

Per case: the drain time, from the worker's start to the last
``RunCompleted`` (one sample), as runs/s, and each run's latency from the
worker's start to its ``RunCompleted`` (median and p99 over the runs).
``vs_none`` is runs/s over the baseline's, measured in the same process
run. Files go under ``.cache/bench``.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from agentlog.eventlog.events import RunStatus, utcnow
from agentlog.runtime import (
    Queue,
    Rate,
    Runtime,
    RuntimeConfig,
    StepContext,
    WorkerConfig,
    Workflow,
    end,
)
from benchmarks.harness import Row, row_from_samples

__all__ = ["collect"]

_CACHE = Path(__file__).resolve().parents[1] / ".cache" / "bench"
CASES: dict[str, Queue | None] = {
    "none": None,
    "concurrency": Queue("q", concurrency=50),
    "rate": Queue("q", concurrency=50, rate=Rate(10**6, per=timedelta(minutes=1))),
    "priority": Queue("q", concurrency=50),
}


def one_step_workflow(queue: Queue | None, name: str = "bench_q") -> Workflow:
    """A workflow of one step in ``queue``: what a queue costs, and nothing else."""
    wf = Workflow(name, state={"n": "replace"}, queue=queue)

    @wf.step
    async def only(ctx: StepContext) -> Any:
        return end(n=1)

    return wf


async def _drain(path: Path, case: str, runs: int) -> tuple[float, list[float]]:
    wf = one_step_workflow(CASES[case])
    url = f"sqlite:///{path}"
    client = RuntimeConfig(owner="client", execute=False, worker=False)
    async with await Runtime.open(url, workflows=[wf], config=client) as rt:
        for n in range(runs):
            priority = n % 10 if case == "priority" else None
            await rt.submit(wf, run_id=f"r{n:05d}", input={"n": 0}, priority=priority)
    worker = WorkerConfig(concurrency=50, poll_seconds=0.05)
    config = RuntimeConfig(owner="w", worker=True, lease_seconds=30, worker_config=worker)
    began = utcnow()
    start = time.perf_counter()
    async with await Runtime.open(url, workflows=[wf], config=config) as rt:
        while True:
            done = await rt.log.list_runs(status=RunStatus.COMPLETED)
            if len(done) == runs:
                break
            await asyncio.sleep(0.05)
        elapsed = time.perf_counter() - start
        ended = [(info.updated_at - began).total_seconds() for info in done if info.updated_at]
    return elapsed, ended


def collect(quick: bool) -> list[Row]:
    runs = 100 if quick else 500
    _CACHE.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    baseline = 0.0
    for case in CASES:
        folder = Path(tempfile.mkdtemp(dir=_CACHE, prefix="queues-"))
        try:
            elapsed, latencies = asyncio.run(_drain(folder / "log.db", case, runs))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        per_s = runs / elapsed
        baseline = baseline or per_s
        rows.append(
            row_from_samples(
                "queues",
                f"drain {runs} runs, queue={case}",
                latencies,
                unit="s",
                runs_per_s=per_s,
                vs_none=per_s / baseline,
            )
        )
    return rows
