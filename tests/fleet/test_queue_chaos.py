"""A queue's limit holds across a fleet whose workers are SIGKILLed at random.

Three worker processes, each with room for 50 runs, share a queue of limit
:data:`~tests.fleet.queue_app.LIMIT` on one SQLite file, with a backlog of
:data:`RUNS` runs. Workers are killed at random points of the backlog and
replaced. Afterwards every run has completed once, and the effects' trace
(``enter``/``exit`` lines on the machine's one monotonic clock; an effect
cut short by a SIGKILL ends at its process's kill) never shows more than
the limit in flight at once. The check counts overlaps: it holds on a slow
machine as on a fast one.

The same chaos, checked from the log's ``RunAdmitted`` events, for a rate
limit (no window of the period holds more admissions than the rate allows,
after restarts that a count kept in memory would have reset) and for
priorities (a queue of one admits its backlog in priority order, oldest
first among equals).
"""

from __future__ import annotations

import random
import re
import time
from datetime import timedelta
from pathlib import Path

import pytest

from agentlog.eventlog._base import EventLog
from agentlog.eventlog.kafka._admin import partition_for
from agentlog.runtime import Runtime, RuntimeConfig
from tests.fleet import queue_app
from tests.support.fleet import Dedup, Fleet, WorkerProc, history, open_reader, types, until
from tests.support.queues import admissions

pytestmark = pytest.mark.fleet

RUNS = 16
KILLS = 3
WORKERS = 3
#: Long enough that a loaded machine's pauses do not outlast a live worker's lease.
LEASE_S = 5.0
#: The Kafka log's partitions (the conftest's default): the queue's admitter owns one.
KAFKA_PARTITIONS = 2
_ASSIGNED = re.compile(r"kafka_group_assigned.*?partitions\W*\[([\d,\s]*)\]")


def _admitter(fleet: Fleet, queue: str) -> WorkerProc | None:
    """The live worker whose last assignment (its log) holds the queue's partition."""
    wanted = partition_for(queue, KAFKA_PARTITIONS)
    for worker in fleet.alive:
        found = _ASSIGNED.findall(worker.stderr.read_text(errors="replace"))
        owned = {int(p) for p in found[-1].split(",") if p.strip()} if found else set()
        if wanted in owned:
            return worker
    return None


def _most_in_flight(trace: Path, killed_at: dict[int, float]) -> int:
    """The most effects in flight at once: each from its ``enter`` to its
    ``exit``, or to its process's SIGKILL if it has no ``exit``."""
    open_: dict[tuple[str, int], float] = {}
    spans: list[tuple[float, float]] = []
    for line in trace.read_text().splitlines():
        what, run, pid_text, at_text = line.split()
        key, at = (run, int(pid_text)), float(at_text)
        if what == "enter":
            open_[key] = at
        else:
            spans.append((open_.pop(key), at))
    for (run, pid), began in open_.items():
        assert pid in killed_at, f"run {run}: effect in worker {pid} never ended, yet not killed"
        spans.append((began, killed_at[pid]))
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])  # ends first
    most = inside = 0
    for _, step in edges:
        inside += step
        most = max(most, inside)
    return most


async def test_sigkilled_workers_never_exceed_the_queue_limit(
    backend: str,
    fleet: Fleet,
    dedup: Dedup,
    log_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trace = tmp_path / "trace.txt"
    monkeypatch.setenv("QUEUE_TRACE", str(trace))  # the workers inherit it
    apps = "tests.fleet.queue_app:workflows"
    config = RuntimeConfig(owner="client", execute=False, worker=False)
    async with await Runtime.open(log_url, workflows=queue_app.workflows, config=config) as rt:
        for n in range(RUNS):  # the backlog, recorded before any worker runs
            await rt.submit(queue_app.mail, run_id=f"m{n:02d}", input={"sent": ""})
    for _ in range(WORKERS):
        fleet.start(apps=apps, lease=LEASE_S)
    chance = random.Random()
    killed_at: dict[int, float] = {}
    targets = sorted(chance.sample(range(1, RUNS - 2), KILLS))

    async def delivered(at_least: int) -> bool:
        return dedup.rows("SELECT count(*) FROM deliveries")[0][0] >= at_least

    for n, target in enumerate(targets):
        await until(lambda t=target: delivered(t), f"{target} deliveries", within=120)
        # On Kafka the first victim is the queue's admitter, if its log says which.
        admitter = _admitter(fleet, "emails") if backend == "kafka" and n == 0 else None
        victim = admitter or chance.choice(fleet.alive)
        victim.kill()
        killed_at[victim.pid] = time.monotonic()
        fleet.start(apps=apps, lease=LEASE_S)

    log = await open_reader(log_url)
    try:

        async def all_completed() -> bool:
            runs = await log.list_runs(status="completed")
            return len([r for r in runs if r.workflow == "mail"]) == RUNS

        await until(all_completed, f"all {RUNS} runs completed", within=180)
        for n in range(RUNS):
            kinds = types(await history(log, f"m{n:02d}"))
            assert kinds.count("RunCompleted") == 1, f"m{n:02d}: {kinds}"
            assert kinds.count("TaskCompleted") == 1, f"m{n:02d}: {kinds}"
            assert kinds.count("RunAdmitted") == 1, f"m{n:02d}: {kinds}"  # one first admission
    finally:
        await log.close()
    keys = dedup.rows("SELECT run, count(DISTINCT key) FROM deliveries GROUP BY run")
    assert sorted(run for run, _ in keys) == [f"m{n:02d}" for n in range(RUNS)]
    assert all(count == 1 for _, count in keys), keys  # one stable key per run's effect
    assert _most_in_flight(trace, killed_at) <= queue_app.LIMIT


async def _kill_along(fleet: Fleet, dedup: Dedup, apps: str, runs: int) -> dict[int, float]:
    """Start the workers, then SIGKILL one at each of KILLS random points of
    the backlog (counted in deliveries) and start a replacement."""
    for _ in range(WORKERS):
        fleet.start(apps=apps, lease=LEASE_S)
    chance = random.Random()
    killed_at: dict[int, float] = {}

    async def delivered(at_least: int) -> bool:
        return dedup.rows("SELECT count(*) FROM deliveries")[0][0] >= at_least

    for target in sorted(chance.sample(range(1, runs - 2), KILLS)):
        await until(lambda t=target: delivered(t), f"{target} deliveries", within=120)
        victim = chance.choice(fleet.alive)
        victim.kill()
        killed_at[victim.pid] = time.monotonic()
        fleet.start(apps=apps, lease=LEASE_S)
    return killed_at


async def _completed_once(log: EventLog, dedup: Dedup, workflow: str, ids: list[str]) -> None:
    """Every run completed once, its effect with one idempotency key."""

    async def all_completed() -> bool:
        runs = await log.list_runs(status="completed")
        return len([r for r in runs if r.workflow == workflow]) == len(ids)

    await until(all_completed, f"all {len(ids)} runs completed", within=180)
    for run_id in ids:
        kinds = types(await history(log, run_id))
        assert kinds.count("RunCompleted") == 1, f"{run_id}: {kinds}"
        assert kinds.count("TaskCompleted") == 1, f"{run_id}: {kinds}"
    keys = dedup.rows("SELECT run, count(DISTINCT key) FROM deliveries GROUP BY run")
    assert sorted(run for run, _ in keys) == sorted(ids)
    assert all(count == 1 for _, count in keys), keys


PACED_RUNS = 12


async def test_sigkilled_workers_never_start_more_than_the_rate(
    backend: str, fleet: Fleet, dedup: Dedup, log_url: str
) -> None:
    ids = [f"p{n:02d}" for n in range(PACED_RUNS)]
    config = RuntimeConfig(owner="client", execute=False, worker=False)
    async with await Runtime.open(
        log_url, workflows=queue_app.paced_workflows, config=config
    ) as rt:
        for run_id in ids:
            await rt.submit(queue_app.paced, run_id=run_id, input={"sent": ""})
    await _kill_along(fleet, dedup, "tests.fleet.queue_app:paced_workflows", PACED_RUNS)
    log = await open_reader(log_url)
    try:
        await _completed_once(log, dedup, "paced", ids)
        started = [ts for ts, _ in await admissions(log, ids)]
    finally:
        await log.close()
    assert len(started) == PACED_RUNS  # each admitted exactly once
    pace, period = queue_app.PACE, queue_app.PERIOD
    gaps = [later - first for first, later in zip(started, started[pace:], strict=False)]
    assert all(gap >= period for gap in gaps), (
        f"more than {pace} starts within {period}: {[g / timedelta(seconds=1) for g in gaps]}"
    )


RANKED_RUNS = 12


async def test_sigkilled_workers_admit_by_priority(
    backend: str,
    fleet: Fleet,
    dedup: Dedup,
    log_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("QUEUE_TRACE", str(tmp_path / "trace.txt"))
    chance = random.Random()
    ranks = {f"k{n:02d}": chance.randrange(4) for n in range(RANKED_RUNS)}
    # On Kafka a worker records a submitted run: one that does not know the
    # workflow records them all (queued) and drives none, then goes.
    recorder = fleet.start(apps="tests.fleet.queue_app:workflows") if backend == "kafka" else None
    config = RuntimeConfig(owner="client", execute=False, worker=False)
    async with await Runtime.open(
        log_url, workflows=queue_app.ranked_workflows, config=config
    ) as rt:
        for run_id, priority in ranks.items():  # all waiting before any worker runs
            await rt.submit(queue_app.ranked, run_id=run_id, input={"sent": ""}, priority=priority)
    if recorder is not None:
        log = await open_reader(log_url)
        try:

            async def all_queued() -> bool:
                queued = await log.list_runs(status="queued")
                return len([r for r in queued if r.workflow == "ranked"]) == RANKED_RUNS

            await until(all_queued, f"all {RANKED_RUNS} runs recorded", within=120)
        finally:
            await log.close()
        recorder.kill()
    killed_at = await _kill_along(
        fleet, dedup, "tests.fleet.queue_app:ranked_workflows", RANKED_RUNS
    )
    log = await open_reader(log_url)
    try:
        await _completed_once(log, dedup, "ranked", list(ranks))
        order = [run_id for _, run_id in await admissions(log, list(ranks))]
        # Oldest first among equals: by RunStarted's time (on SQLite the submit
        # order; on Kafka the order the runs' owners recorded them in).
        started = {run_id: (await log.get_run(run_id)).started_at for run_id in ranks}
    finally:
        await log.close()
    expected = sorted(ranks, key=lambda run_id: (ranks[run_id], started[run_id], run_id))
    assert order == expected, f"priorities {ranks}"
    assert _most_in_flight(tmp_path / "trace.txt", killed_at) <= 1
