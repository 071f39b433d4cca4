"""Queue benchmarks on a Kafka worker fleet: what the queue's admitter costs.

One in-process worker (a consumer group member owning all 4 partitions,
concurrency 50) drives runs of a one-step workflow that a client submits
(commands) once the worker owns every partition. The cases differ only in
the workflow's queue, as in ``bench_queues``:

* ``none``: no queue (the baseline);
* ``concurrency``: ``Queue(concurrency=50)``, a limit never reached, so the
  figure is the cost of asking the admitter (a command round trip and one of
  its transactions per admission, shared by asks that arrive together) and
  of the slot's release, not of waiting;
* ``rate``: the same plus ``Rate(10**6, per=1 minute)`` (never reached).

Per case: from the first submit to the last ``RunCompleted`` (one sample),
as runs/s, and each run's latency from the first submit to its
``RunCompleted`` (median and p99). ``vs_none`` is runs/s over the
baseline's, in the same process run and on the same broker. Uses
``KAFKA_BOOTSTRAP_SERVERS`` when set; otherwise starts a broker.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from agentlog.eventlog.events import RunStatus, utcnow
from agentlog.runtime import (
    Runtime,
    RuntimeConfig,
    WorkerConfig,
)
from benchmarks.bench_queues import CASES, one_step_workflow
from benchmarks.harness import Row, kafka_broker, row_from_samples

__all__ = ["collect"]

_PARTITIONS = 4
_CASES = {case: CASES[case] for case in ("none", "concurrency", "rate")}


async def _drain(bootstrap: str, case: str, runs: int) -> tuple[float, list[float]]:
    wf = one_step_workflow(_CASES[case], "bench_kq")
    base = f"kafka://{bootstrap}/kq{uuid.uuid4().hex[:10]}"
    worker = WorkerConfig(concurrency=50, poll_seconds=0.05)
    config = RuntimeConfig(owner="w", worker=True, lease_seconds=30, worker_config=worker)
    url = f"{base}?group=w&partitions={_PARTITIONS}&session_timeout=6"
    async with await Runtime.open(url, workflows=[wf], config=config) as rt:
        log: Any = rt.log
        while len(log.owned_partitions) < _PARTITIONS:
            await log.wait_for_ownership_change(0.5)
        client = RuntimeConfig(owner="client", execute=False, worker=False)
        client_url = f"{base}?layout=partitioned&partitions={_PARTITIONS}"
        async with await Runtime.open(client_url, workflows=[wf], config=client) as cl:
            began = utcnow()
            start = time.perf_counter()
            for n in range(runs):
                await cl.submit(wf, run_id=f"r{n:05d}", input={"n": 0})
            while True:
                done = await rt.log.list_runs(status=RunStatus.COMPLETED)
                if len(done) == runs:
                    break
                await asyncio.sleep(0.05)
            elapsed = time.perf_counter() - start
    ended = [(info.updated_at - began).total_seconds() for info in done if info.updated_at]
    return elapsed, ended


async def _all(bootstrap: str, runs: int) -> list[Row]:
    rows: list[Row] = []
    baseline = 0.0
    for case in _CASES:
        elapsed, latencies = await _drain(bootstrap, case, runs)
        per_s = runs / elapsed
        baseline = baseline or per_s
        rows.append(
            row_from_samples(
                "kafka_queues",
                f"kafka fleet: submit and drain {runs} runs, queue={case}",
                latencies,
                unit="s",
                runs_per_s=per_s,
                vs_none=per_s / baseline,
            )
        )
    return rows


def collect(quick: bool) -> list[Row]:
    with kafka_broker("agentlog-kafka-queues-bench-") as (bootstrap, _data):
        return asyncio.run(_all(bootstrap, 100 if quick else 300))
