"""Durable timers across worker restarts, with real ``agentlog worker`` processes.

* A run sleeping 3 s whose worker is SIGKILLed while it sleeps: a new
  worker fires the timer and the run finishes once (one TimerFired; the
  step after the sleep ran once; the effect before it was delivered once).
* A thousand runs sleeping about 2 s: their worker is SIGKILLed while the
  timers are pending, the next one is SIGTERMed (it exits 0), and two more
  finish side by side: every timer fired exactly once and every run completed.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from agentlog.eventlog.events import (
    InterruptRaised,
    RunStatus,
    StepCompleted,
    TimerFired,
    WriterClaimed,
)
from agentlog.runtime import Runtime
from tests.fleet import app
from tests.support.fleet import Dedup, Fleet, history, types, until

pytestmark = pytest.mark.fleet

NAP_SECONDS = 3
SLEEPERS = 1000
SLEEPER_SECONDS = 2.0


async def _status(client: Runtime, run_id: str) -> str | None:
    info = await client.log.find_run(run_id)
    return None if info is None or info.last_seq == 0 else info.status


@pytest.mark.timeout(300)
async def test_a_sleeping_run_whose_worker_dies_wakes_once_on_a_new_worker(
    fleet: Fleet, client: Runtime, dedup: Dedup
) -> None:
    first = fleet.start()
    await client.submit(app.nap, run_id="nap", input={"seconds": NAP_SECONDS})

    async def asleep() -> bool:
        info = await client.log.find_run("nap")
        return info is not None and info.status == RunStatus.WAITING and info.wake_at is not None

    await until(asleep, "the run sleeps on its timer", 120)
    first.kill()
    # After the kill nothing more is written by the first worker: the timer is pending.
    parked = await history(client.log, "nap")
    assert "TimerFired" not in types(parked), "the timer fired before the worker was killed"
    assert isinstance(parked[-1].data, InterruptRaised) and parked[-1].data.kind == "timer"

    second = fleet.start()
    owner = second.ready_line.split()[1]

    async def completed() -> bool:
        return await _status(client, "nap") == RunStatus.COMPLETED

    await until(completed, "the new worker fired the timer and finished the run", 120)
    events = await history(client.log, "nap")
    fired = [i for i, e in enumerate(events) if isinstance(e.data, TimerFired)]
    assert len(fired) == 1
    claims = [e.data for e in events[: fired[0]] if isinstance(e.data, WriterClaimed)]
    assert claims[-1].owner == owner, "the timer was fired by someone else than the new worker"
    wakes = dedup.rows("SELECT gen FROM steps WHERE run = 'nap' AND step = 'wake'")
    assert wakes == [(second.pid,)], f"the step after the sleep ran {len(wakes)} times"
    kinds = Counter(k for (k,) in dedup.rows("SELECT kind FROM deliveries WHERE run = 'nap'"))
    assert kinds == {"before": 1, "after": 1}
    state = await client.get_state("nap")
    assert state.values["before"] == "before(nap)" and state.values["after"] == "after(nap)"


async def _count(client: Runtime, status: str) -> int:
    return len(await client.log.list_runs(status=status))


# A hang guard only: a thousand runs through three worker processes on 2 loaded cores.
@pytest.mark.timeout(600)
async def test_a_thousand_pending_timers_fire_once_across_worker_restarts(
    fleet: Fleet, client: Runtime
) -> None:
    began = time.monotonic()
    run_ids = [f"sleeper-{i:04d}" for i in range(SLEEPERS)]
    for run_id in run_ids:
        await client.submit(app.sleeper, run_id=run_id, input={"seconds": SLEEPER_SECONDS})
    submitted_s = time.monotonic() - began

    first = fleet.start(concurrency=100)

    async def many_asleep() -> bool:
        return await _count(client, RunStatus.WAITING) >= SLEEPERS // 3

    await until(many_asleep, f"{SLEEPERS // 3} runs sleep on their timers", 300, 0.2)
    first.kill()
    pending_at_kill = await _count(client, RunStatus.WAITING)
    done_at_kill = await _count(client, RunStatus.COMPLETED)

    second = fleet.start(concurrency=100)

    async def second_made_progress() -> bool:
        done = await _count(client, RunStatus.COMPLETED)
        return done >= min(SLEEPERS, done_at_kill + 100)

    await until(second_made_progress, "the second worker completed 100 more runs", 300, 0.2)
    assert second.terminate() == 0, second.log_tail()
    done_at_term = await _count(client, RunStatus.COMPLETED)

    # Two workers finish together: each due timer is fired by one of them, once.
    fleet.start(concurrency=100)
    fleet.start(concurrency=100)

    async def all_completed() -> bool:
        return await _count(client, RunStatus.COMPLETED) == SLEEPERS

    await until(all_completed, f"all {SLEEPERS} runs completed", 400, 0.5)
    for run_id in run_ids:
        events = await history(client.log, run_id)
        kinds = Counter(types(events))
        assert kinds["InterruptRaised"] == 1 and kinds["TimerFired"] == 1, (run_id, kinds)
        assert kinds["RunCompleted"] == 1 and kinds["RunStarted"] == 1, (run_id, kinds)
        woke = [e.data for e in events if isinstance(e.data, StepCompleted)]
        assert [s.step for s in woke] == ["lie_down", "get_up"], run_id
    print(
        f"TIMERS runs={SLEEPERS} submitted-in={submitted_s:.0f}s "
        f"pending-at-sigkill={pending_at_kill} done-at-sigkill={done_at_kill} "
        f"done-at-sigterm={done_at_term} total={time.monotonic() - began:.0f}s"
    )
