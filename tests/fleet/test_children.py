"""Child runs driven by ``agentlog worker`` processes, on SQLite and on a Kafka
worker fleet: a parent starts three children and waits for them; the worker
that drives the parent is SIGKILLed while it waits, and the fleet (any
worker) drives the children and the parent on. Each child starts once and
the parent completes with their results. Bounded by count: 3 children.

Cancelling a parent from a client cancels its children: the worker that
drove them is SIGKILLed first, so the cancel is applied by the next worker
(on Kafka the client only sends a command), and the cascade must not depend
on the client still waiting.
"""

from __future__ import annotations

import pytest

from agentlog.eventlog.events import RunStatus
from agentlog.runtime import Runtime
from tests.support.fleet import Dedup, Fleet, history, until

pytestmark = [pytest.mark.fleet, pytest.mark.usefixtures("backend")]  # on SQLite and Kafka

KIDS = [f"fam/spawn/0:0:{i}" for i in range(3)]


@pytest.mark.timeout(300)
async def test_a_parent_waits_on_children_across_a_killed_worker(
    fleet: Fleet, client: Runtime, dedup: Dedup
) -> None:
    first = fleet.start()
    await client.submit("family", run_id="fam")

    async def parked() -> bool:  # the parent started its children and waits on them
        info = await client.log.find_run("fam")
        return info is not None and info.status == RunStatus.WAITING

    await until(parked, "the parent waits on its children", 120)
    first.kill()  # the parent's (and maybe its children's) driver dies
    fleet.start()
    fleet.start()

    async def completed() -> bool:
        info = await client.log.find_run("fam")
        return info is not None and info.status == RunStatus.COMPLETED

    await until(completed, "the parent completed", 180)
    assert (await client.get_state("fam")).values["outs"] == [10, 20, 30]
    runs = {info.run_id: info.status for info in await client.log.list_runs()}
    assert {run_id: runs.get(run_id) for run_id in KIDS} == dict.fromkeys(KIDS, RunStatus.COMPLETED)
    assert sorted(r for r in runs if r.startswith("fam")) == sorted(["fam", *KIDS])
    for kid in KIDS:
        await history(client.log, kid)  # one contiguous history each
    delivered = dedup.rows("SELECT run FROM deliveries WHERE kind = 'kid'")
    assert sorted({row[0] for row in delivered}) == KIDS, delivered


HELD = [f"held/hold/0:0:{i}" for i in range(2)]


@pytest.mark.timeout(300)
async def test_cancelling_a_parent_from_a_client_cancels_its_children_across_a_killed_worker(
    fleet: Fleet, client: Runtime
) -> None:
    first = fleet.start()
    await client.submit("holder", run_id="held")

    async def status(run_id: str) -> RunStatus | None:
        info = await client.log.find_run(run_id)
        return None if info is None else info.status

    async def all_parked() -> bool:  # the parent and both children wait
        return [await status(r) for r in ["held", *HELD]] == [RunStatus.WAITING] * 3

    await until(all_parked, "the parent and its children wait", 120)
    first.kill()  # no worker runs while the cancel is asked for
    await client.cancel("held", "the test cancels the parent")
    fleet.start()

    async def all_cancelled() -> bool:
        return [await status(r) for r in ["held", *HELD]] == [RunStatus.CANCELLED] * 3

    await until(all_cancelled, "the parent and its children are cancelled", 180)
    for kid in HELD:
        state = await client.get_state(kid)
        assert "held" in str(state.error), state.error  # the cascade's reason names the parent
        await history(client.log, kid)
