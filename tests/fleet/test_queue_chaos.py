"""A queue's limit holds across a fleet whose workers are SIGKILLed at random.

Three worker processes, each with room for 50 runs, share a queue of limit
:data:`~tests.fleet.queue_app.LIMIT` on one SQLite file, with a backlog of
:data:`RUNS` runs. Workers are killed at random points of the backlog and
replaced. Afterwards every run has completed once, and the effects' trace
(``enter``/``exit`` lines on the machine's one monotonic clock; an effect
cut short by a SIGKILL ends at its process's kill) never shows more than
the limit in flight at once. The check counts overlaps: it holds on a slow
machine as on a fast one.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from agentlog.runtime import Runtime, RuntimeConfig
from tests.fleet import queue_app
from tests.support.fleet import Dedup, Fleet, history, open_reader, types, until

pytestmark = pytest.mark.fleet

RUNS = 16
KILLS = 3
WORKERS = 3
#: Long enough that a loaded machine's pauses do not outlast a live worker's lease.
LEASE_S = 5.0


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
    fleet: Fleet, dedup: Dedup, log_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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

    for target in targets:
        await until(lambda t=target: delivered(t), f"{target} deliveries", within=120)
        victim = chance.choice(fleet.alive)
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
    finally:
        await log.close()
    keys = dedup.rows("SELECT run, count(DISTINCT key) FROM deliveries GROUP BY run")
    assert sorted(run for run, _ in keys) == [f"m{n:02d}" for n in range(RUNS)]
    assert all(count == 1 for _, count in keys), keys  # one stable key per run's effect
    assert _most_in_flight(trace, killed_at) <= queue_app.LIMIT
