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

from agentlog.eventlog.events import MessageSent, RunStarted, RunStatus, TaskCompleted, TimerFired
from agentlog.runtime import Runtime, RuntimeConfig
from agentlog.runtime._children import child_topic
from tests.crash.family_worker import CHILDREN, WORKFLOWS, child, lone_parent, parent
from tests.crash.worker import kill, spawn_ready
from tests.support.fleet import until

pytestmark = pytest.mark.crash

REPO = Path(__file__).resolve().parents[2]
KILLS = 4
LEASE_S = 0.5


def spawn(url: str, logs: Path, n: int, *flags: str) -> subprocess.Popen[str]:
    args = ["-m", "tests.crash.family_worker", url, str(LEASE_S), *flags]
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


@pytest.mark.timeout(300)
async def test_a_wake_lost_to_a_sigkill_is_made_up_for_by_the_parents_recheck_timer(
    tmp_path: Path,
) -> None:
    """The worker SIGKILLs itself once the child's end is recorded and before
    its outcome is sent to the parent (``--lose-wake``): no message ever wakes
    the parked parent. A fresh worker completes it anyway, because the park
    carries a re-check timer that runs the parent's step, which reads the
    child's end and records the outcome itself."""
    url = f"sqlite:///{tmp_path / 'agentlog.db'}"
    kid = "lone/await_one/0:0:0"
    config = RuntimeConfig(owner="client", execute=False, worker=False, lease_seconds=LEASE_S)
    async with await Runtime.open(url, workflows=WORKFLOWS, config=config) as client:
        await client.submit(lone_parent, run_id="lone")

        async def parked() -> bool:  # the parent waits on its child, which waits on "go"
            state = await client.get_state("lone")
            return child_topic(kid) in [i.get("payload", {}).get("topic") for i in state.interrupts]

        proc = await asyncio.to_thread(spawn, url, tmp_path, 0, "--lose-wake")
        try:
            await until(parked, "the parent parked on its child", 120)
            await until(lambda: _waits_on_go(client, kid), "the child parked on its recv", 120)
            await client.send(kid, "go", "now")  # the child ends; its driver dies
            await asyncio.to_thread(proc.wait, 120)
        finally:
            await asyncio.to_thread(kill, proc)
        assert proc.returncode == -9, "the worker was to SIGKILL itself before the wake"
        assert (await client.log.get_run(kid)).status == RunStatus.COMPLETED
        lost = [e async for e in client.log.read("lone")]
        assert not any(isinstance(e.data, MessageSent) for e in lost), "the wake was sent"
        assert (await client.get_state("lone")).status != RunStatus.COMPLETED

        proc = await asyncio.to_thread(spawn, url, tmp_path, 1)
        try:

            async def ended() -> bool:
                return (await client.log.get_run("lone")).status == RunStatus.COMPLETED

            await until(ended, "the parent completed after its re-check", 180)
        finally:
            await asyncio.to_thread(kill, proc)
        state = await client.get_state("lone")
        events = [e.data async for e in client.log.read("lone")]
    assert state.values["got"] == "now"
    sent = [e for e in events if isinstance(e, MessageSent)]
    # recorded by the parent's own step, run again by its timer: no recv was open
    assert [(e.topic, e.key, e.wakes) for e in sent] == [(child_topic(kid), f"child:{kid}", None)]
    assert any(isinstance(e, TimerFired) and e.ids for e in events)


async def _waits_on_go(client: Runtime, kid: str) -> bool:
    state = await client.get_state(kid)
    return any(i.get("payload", {}).get("topic") == "go" for i in state.interrupts)
