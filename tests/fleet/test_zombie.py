"""A zombie worker on SQLite: SIGSTOP a worker mid-effect past its lease, let
another worker take its runs over, SIGCONT it.

The woken worker's writes are fenced (every history stays one contiguous
seq whose writer epochs never go down, each task result recorded once), it
starts no side effect after it wakes (the dedup service stamps every
delivery), it keeps serving, and the runs complete on the other worker.
"""

from __future__ import annotations

import signal
import time
from collections import Counter

import pytest

from agentlog.eventlog.events import RunStatus, TaskCompleted, WriterClaimed
from agentlog.runtime import Runtime
from tests.fleet import app
from tests.support.fleet import Dedup, Fleet, history, until

pytestmark = pytest.mark.fleet

RUNS = 6
TRIALS = 3


@pytest.mark.timeout(600)
async def test_a_paused_worker_that_wakes_after_its_lease_is_fenced(
    fleet: Fleet, client: Runtime, dedup: Dedup
) -> None:
    for trial in range(TRIALS):
        await _one_trial(fleet, client, dedup, trial)


async def _one_trial(fleet: Fleet, client: Runtime, dedup: Dedup, trial: int) -> None:
    zombie = fleet.start()
    run_ids = [f"zombie-{trial}-{i}" for i in range(RUNS)]
    for run_id in run_ids:
        await client.submit(app.slow, run_id=run_id, input={})

    async def all_in_an_effect() -> bool:
        # Each run's first effect was delivered by the zombie: it is inside
        # the effect's second of work, holding the run's lease.
        rows = dedup.rows(
            "SELECT DISTINCT run FROM deliveries WHERE gen = ? AND run LIKE ?",
            zombie.pid,
            f"zombie-{trial}-%",
        )
        return len(rows) == RUNS

    await until(all_in_an_effect, "the first worker is inside every run's effect", 120, 0.05)
    zombie.proc.send_signal(signal.SIGSTOP)
    taker = fleet.start()
    taker_owner = taker.ready_line.split()[1]

    async def all_taken_over() -> bool:
        for run_id in run_ids:
            events = await history(client.log, run_id)
            owners = [e.data.owner for e in events if isinstance(e.data, WriterClaimed)]
            if taker_owner not in owners:
                return False
        return True

    await until(all_taken_over, "the second worker took every run over", 120)
    woke_at = time.time()
    zombie.proc.send_signal(signal.SIGCONT)

    async def all_completed() -> bool:
        infos = [await client.log.get_run(run_id) for run_id in run_ids]
        return all(i.status == RunStatus.COMPLETED for i in infos)

    await until(all_completed, "every run completed on the second worker", 180)
    late = dedup.rows(
        "SELECT run, key, ts FROM deliveries WHERE gen = ? AND ts > ?", zombie.pid, woke_at
    )
    assert late == [], f"the zombie started side effects after it woke: {late}"
    for run_id in run_ids:
        events = await history(client.log, run_id)
        epochs = [e.writer_epoch for e in events]
        assert epochs == sorted(epochs), f"{run_id}: a fenced writer's event after a newer one"
        completed = Counter(e.data.key for e in events if isinstance(e.data, TaskCompleted))
        assert set(completed.values()) == {1}, f"{run_id}: a task recorded twice: {completed}"
        state = await client.get_state(run_id)
        assert state.values["done"] == [f"work({s})" for s in app.SLOW_STEPS]
    assert zombie.proc.poll() is None, "the woken worker died instead of serving on"
    zombie.kill()
    taker.kill()
