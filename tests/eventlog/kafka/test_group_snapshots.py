"""Snapshots of the runs a worker fleet's member owns: one per park, and no reads.

A run of three events (RunStarted, WriterClaimed, InterruptRaised) that parks
on a human's answer is worth one snapshot, the one taken when it parks
(``SnapshotPolicy.on_park``). (A cProfile of a parking worker lists
``save_snapshot`` about 6.5 times per run: cProfile counts each resumption of
a coroutine as a call, and the save awaited the broker that often.) What a
save cost was two reads of the runs topic (``catch_up``: a list-offsets round
trip each, serialized behind the reader's lock) before its write, for a run
whose tail and snapshots the owner already holds. The logs are wrapped to
count (a counter around the real call, not a mock).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import Any

import pytest

from agentlog.eventlog._base import Snapshot
from agentlog.eventlog.events import Event, RunStatus, StepCompleted, utcnow
from agentlog.runtime import Runtime, RuntimeConfig
from tests.eventlog.kafka.group_support import PARTITIONS, asks, open_log, settle, started

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

RUNS = 6
WAIT_S = 120.0


async def test_a_parked_run_saves_one_snapshot(kafka_bootstrap: str, kafka_name: str) -> None:
    base = f"kafka://{kafka_bootstrap}/{kafka_name}"
    saved: collections.Counter[str] = collections.Counter()
    async with contextlib.AsyncExitStack() as stack:
        worker_url = f"{base}?group=workers&partitions=2&session_timeout=6"
        worker = await Runtime.open(worker_url, workflows=[asks()], config=RuntimeConfig("worker"))
        save = worker.log.save_snapshot

        async def counted(snapshot: Snapshot) -> None:
            saved[snapshot.run_id] += 1
            await save(snapshot)

        worker.log.save_snapshot = counted  # type: ignore[method-assign]
        await stack.enter_async_context(worker)
        config = RuntimeConfig(owner="client", execute=False, worker=False)
        client_url = f"{base}?layout=partitioned&partitions=2"
        client = await stack.enter_async_context(
            await Runtime.open(client_url, workflows=[asks()], config=config)
        )
        runs = [f"park-{n}" for n in range(RUNS)]
        await asyncio.gather(*(client.submit("asks", run_id=run_id) for run_id in runs))
        for run_id in runs:
            state = await client.wait(run_id, timeout=WAIT_S)
            assert state.status == RunStatus.WAITING, state.status
        for run_id in runs:
            events = [e.type async for e in client.log.read(run_id)]
            assert events == ["RunStarted", "WriterClaimed", "InterruptRaised"], events
    assert dict(saved) == {run_id: 1 for run_id in runs}, (
        f"snapshots saved per parked run (each has {len(events)} events): {dict(saved)}"
    )


async def test_an_owner_saves_a_snapshot_without_reading_the_broker(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    """The owner of a run knows its tail and its snapshots (nobody else writes
    them): saving one reads nothing back from the runs topic, and a fresh
    client loads it and reads the run from it."""
    run_id = "snap-owned"
    member = await open_log(kafka_bootstrap, kafka_name, "workers")
    try:
        await settle([member], lambda: len(member.owned_partitions) == PARTITIONS, "member")
        epoch = await member.claim_writer(run_id)
        await member.append([Event(run_id, 1, started(), writer_epoch=epoch)])
        steps = [StepCompleted("step", seq, 0, {"n": seq}) for seq in (2, 3)]
        await member.append([Event(run_id, s.superstep, s, writer_epoch=epoch) for s in steps])
        reader = member._reader
        reads = 0
        catch_up = reader.catch_up

        async def counted(partitions: Any = None) -> None:
            nonlocal reads
            reads += 1
            await catch_up(partitions)

        reader.catch_up = counted  # type: ignore[method-assign]
        await member.save_snapshot(Snapshot(run_id, 3, b"at-3", utcnow()))
        assert reads == 0, f"saving an owned run's snapshot read the runs topic {reads} times"
    finally:
        await member.close()

    client = await open_log(kafka_bootstrap, kafka_name)
    try:
        loaded = await client.load_snapshot(run_id)
        assert loaded is not None and (loaded.seq, loaded.state) == (3, b"at-3")
        assert [e.seq async for e in client.read(run_id, after_seq=2)] == [3]
    finally:
        await client.close()
