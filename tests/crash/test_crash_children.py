"""SIGKILL the process that drives a parent run and its child runs.

The worker (tests/crash/family_worker.py) drives a parent that starts three
children and waits for their results. It is killed at seeded random moments
between the parent's start and its end, and started again, a few times.
Whatever the kills hit (a child's start recorded or not, a child's end
recorded with its wake to the parent not yet sent, a parked parent), each
child is started once (one run per derived id, one start task per child in
the parent) and the parent completes with every child's result.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
from pathlib import Path

import pytest

from agentlog.eventlog.events import RunStarted, RunStatus, TaskCompleted
from agentlog.runtime import Runtime, RuntimeConfig
from tests.crash.family_worker import CHILDREN, child, parent
from tests.crash.worker import kill, spawn_ready
from tests.support.fleet import until

pytestmark = pytest.mark.crash

REPO = Path(__file__).resolve().parents[2]
KILLS = 4
LEASE_S = 0.5


def spawn(url: str, logs: Path, n: int) -> subprocess.Popen[str]:
    args = ["-m", "tests.crash.family_worker", url, str(LEASE_S)]
    return spawn_ready(args, logs / f"family-{n}.log")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_each_child_starts_once_and_the_parent_completes_across_sigkills(
    seed: int, tmp_path: Path
) -> None:
    rng = random.Random(f"children-{seed}")
    url = f"sqlite:///{tmp_path / 'agentlog.db'}"
    config = RuntimeConfig(owner="client", execute=False, worker=False, lease_seconds=LEASE_S)
    async with await Runtime.open(url, workflows=[parent, child], config=config) as client:
        await client.submit(parent, run_id="family")

        async def ended() -> bool:
            return (await client.log.get_run("family")).status == RunStatus.COMPLETED

        async def began() -> bool:  # the parent recorded its first child's start
            return (await client.log.get_run("family")).last_seq >= 3 or await ended()

        midway = 0  # kills that left the parent unfinished
        for n in range(KILLS + 1):
            proc = await asyncio.to_thread(spawn, url, tmp_path, n)
            try:
                if n == KILLS:  # the last worker is left to finish
                    await until(ended, "the parent completed", 180)
                else:
                    await until(began, "the parent started its children", 120, every=0.01)
                    await asyncio.sleep(rng.uniform(0.0, 0.5))
            finally:
                await asyncio.to_thread(kill, proc)
            if await ended():
                break
            midway += 1
        state = await client.get_state("family")
        events = [e async for e in client.log.read("family")]
        runs = {info.run_id: info for info in await client.log.list_runs()}
        kids = [f"family/fan/0:0:{i}" for i in range(CHILDREN)]
        starts = {kid: [e async for e in client.log.read(kid)] for kid in kids}
    assert state.status == RunStatus.COMPLETED, state.error
    assert midway >= 2, f"only {midway} kills landed before the parent completed"
    assert state.values["outs"] == [10, 20, 30]
    assert sorted(runs) == sorted(["family", *kids])  # no second child
    for kid, kid_events in starts.items():
        assert sum(isinstance(e.data, RunStarted) for e in kid_events) == 1, kid
        assert runs[kid].status == RunStatus.COMPLETED, kid
    started = [e.data.result for e in events if isinstance(e.data, TaskCompleted)]
    assert sorted(set(started)) == kids  # each child's start recorded (once per task key)
    assert len(started) == len(set(started)), started
