"""A Kafka worker that takes a dead worker's partitions over lists its runs as it owns them.

A worker keeps two rows of each run of a partition it owns: its partition
owner's tail (read when it opened the partition, then kept by its own
commits: the truth) and the reader's copy of the run's latest index entry
on the runs topic. The dead worker's entries still name its lease (a
SIGKILLed worker never lets go), which the new owner's tail drops on
opening (that worker is fenced). The lists and counts (``list_runs``,
``page_runs``) and a worker's pass over its queues (``arrange``, which
counts a queue's slots from ``list_runs``) must read the tail: the reader's
copy showed the run held by the dead worker's lease until it ran out, so a
queue of one counted the run as holding its own slot and the new worker
never took it over within the lease.

Worker ``dead`` is a group member driven by hand (claims with a lease of an
hour, records the run's start and admission, and leaves without letting go:
a SIGKILLed worker's footprint). Worker ``new`` then owns every partition.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentlog.eventlog._run_pages import RunQuery
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import Event, RunAdmitted, RunStatus, utcnow
from agentlog.eventlog.kafka._grouplog import PartitionedKafkaEventLog
from agentlog.runtime import Queue, Runtime, RuntimeConfig, StepContext, Workflow, end
from tests.support.queues import until
from tests.support.runtime import Calls

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

WAIT_S = 120.0
#: The dead worker's lease: far longer than the test may wait.
DEAD_LEASE_S = 3600.0


def _queued(calls: Calls, gate: asyncio.Event) -> Workflow:
    wf = Workflow("mail", state={"n": "replace"}, queue=Queue("emails", concurrency=1))

    @wf.step
    async def send(ctx: StepContext) -> Any:
        calls.hit(ctx.run_id)
        await gate.wait()
        return end(n=1)

    return wf


async def _die_holding(url: str, run_id: str) -> None:
    """As a worker that is SIGKILLed: apply the run's start, admit it, keep its lease."""
    log = await open_log(url)
    assert isinstance(log, PartitionedKafkaEventLog)
    try:
        applied = False

        async def started() -> bool:
            nonlocal applied
            for command in await log.take_commands(limit=10):
                epoch = await log.claim_writer(run_id, owner="dead", lease_seconds=DEAD_LEASE_S)
                first = Event(run_id, 1, command.data, writer_epoch=epoch)
                admitted = Event(run_id, 2, RunAdmitted("emails"), writer_epoch=epoch)
                await log.append([first, admitted])
                await log.ack_command(command)
                applied = True
            return applied

        await until(started, "the dead worker applies the start", WAIT_S)
        assert (await log.get_run(run_id)).lease_live(utcnow())
    finally:
        await log.close()  # leaves the group; the lease stays on record


async def test_a_new_owner_lists_and_takes_over_a_dead_workers_run(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    calls, gate = Calls(), asyncio.Event()
    wf = _queued(calls, gate)
    base = f"kafka://{kafka_bootstrap}/{kafka_name}"
    group = f"{base}?group=workers&partitions=2&session_timeout=6"
    client = await Runtime.open(
        f"{base}?layout=partitioned&partitions=2",
        workflows=[wf],
        config=RuntimeConfig(owner="client", execute=False, worker=False),
    )
    new = None
    try:
        await client.submit(wf, run_id="q", input={"n": 0})
        await _die_holding(group, "q")
        new = await Runtime.open(
            group, workflows=[wf], config=RuntimeConfig(owner="new", worker=False, lease_seconds=30)
        )
        log = new.log
        assert isinstance(log, PartitionedKafkaEventLog)

        async def owns_all() -> bool:
            await log.wait_for_ownership_change(0.2)
            return len(log.owned_partitions) == 2

        await until(owns_all, "the new worker owns both partitions", WAIT_S)
        now = utcnow()
        mine = await log.find_run("q")  # its owner's tail: the dead lease is over
        assert mine is not None and mine.status == RunStatus.RUNNING
        assert not mine.lease_live(now)
        listed = [i for i in await log.list_runs() if i.run_id == "q"]
        assert listed == [mine], "the run list shows a row the run's owner does not hold"
        page = await log.page_runs(RunQuery(limit=100))
        assert [i for i in page.rows if i.run_id == "q"] == [mine]
        assert page.counts == {RunStatus.RUNNING: 1} and page.total == 1

        async def taken_over() -> bool:
            await new.worker.run_once()
            return calls.count["q"] == 1

        # The queue's one slot is free: the dead worker's lease must not hold it.
        await until(taken_over, "the new worker drives the dead worker's run", WAIT_S)
        gate.set()

        async def completed() -> bool:
            await new.worker.run_once()
            info = await log.find_run("q")
            return info is not None and info.status == RunStatus.COMPLETED

        await until(completed, "the run completes", WAIT_S)
        kinds = [e.type async for e in log.read("q")]
        assert kinds.count("RunAdmitted") == 1, kinds
    finally:
        gate.set()
        await client.close()
        if new is not None:
            await new.close()
