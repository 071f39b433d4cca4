"""Pruning an archived run on Kafka keeps its index entry, marked archived.

A shared partition cannot drop one key's records, so the run index is what
says a run's events are gone: the run stays visible (and its id taken) to
every process, and a read of its events says where they went.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from aiokafka import AIOKafkaProducer

from agentlog.errors import CorruptEventError, RunArchivedError, UnknownRunError
from agentlog.eventlog._base import EventLog, Snapshot
from agentlog.eventlog.codec import encode_event
from agentlog.eventlog.events import Event, RunStarted, StepCompleted
from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog

pytestmark = pytest.mark.kafka

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def config(kafka_bootstrap: str, kafka_name: str) -> KafkaConfig:
    return KafkaConfig(bootstrap_servers=kafka_bootstrap, name=kafka_name, partitions=1)


@pytest.fixture
async def log(config: KafkaConfig) -> AsyncIterator[KafkaEventLog]:
    async with await KafkaEventLog.connect(config) as opened:
        yield opened


def _run(run_id: str, count: int, epoch: int) -> list[Event]:
    started = RunStarted("wf", "1", {}, durability="sync", fingerprint="f")
    steps = [StepCompleted("s", n, 0, {"n": n}) for n in range(1, count)]
    return [Event(run_id, 1, started, writer_epoch=epoch)] + [
        Event(run_id, seq, data, writer_epoch=epoch) for seq, data in enumerate(steps, 2)
    ]


async def _seed(log: EventLog, run_id: str, count: int) -> None:
    epoch = await log.claim_writer(run_id, owner="seed")
    await log.append(_run(run_id, count, epoch))


async def _read(log: EventLog, run_id: str, after_seq: int = 0) -> list[int]:
    return [e.seq async for e in log.read(run_id, after_seq=after_seq)]


@pytest.mark.parametrize("keep_latest_snapshot", [False, True])
async def test_pruned_run_stays_known_and_archived(
    log: KafkaEventLog, config: KafkaConfig, keep_latest_snapshot: bool
) -> None:
    await _seed(log, "gone", 5)
    await _seed(log, "kept", 3)
    for seq in (2, 4):
        await log.save_snapshot(Snapshot("gone", seq, bytes([seq]), T0))
    before = await log.get_run("gone")
    await log.prune("gone", keep_latest_snapshot=keep_latest_snapshot)
    # A fresh process sees the same: the archived entry is on the runs topic.
    async with await KafkaEventLog.connect(config) as fresh:
        for view in (log, fresh):
            info = await view.get_run("gone")
            assert info.archived and not before.archived
            assert (info.status, info.last_seq, info.workflow, info.version, info.steps) == (
                before.status,
                before.last_seq,
                before.workflow,
                before.version,
                before.steps,
            )
            assert await view.find_run("gone") == info
            assert {r.run_id for r in await view.list_runs()} == {"gone", "kept"}
            with pytest.raises(RunArchivedError) as caught:
                await _read(view, "gone")
            assert isinstance(caught.value, UnknownRunError)  # old callers still catch it
            assert "'gone'" in str(caught.value)
            with pytest.raises(RunArchivedError):
                await _read(view, "gone", after_seq=4)
            assert await _read(view, "gone", after_seq=5) == []  # nothing wanted is gone
            latest = await view.load_snapshot("gone")
            assert (latest.seq if latest else None) == (4 if keep_latest_snapshot else None)
            assert await view.load_snapshot("gone", at_or_before=3) is None
            assert await _read(view, "kept") == [1, 2, 3]


async def test_a_pruned_run_that_goes_on_reads_only_what_came_after(
    log: KafkaEventLog, config: KafkaConfig
) -> None:
    """The archived seqs stay archived for every process once the run appends
    again (the events are still on the shared partition), and a second prune
    archives the rest."""
    await _seed(log, "on", 3)
    await log.prune("on", keep_latest_snapshot=True)
    epoch = await log.claim_writer("on", owner="after")
    more = [Event("on", seq, StepCompleted("s", seq, 0, {}), writer_epoch=epoch) for seq in (4, 5)]
    await log.append(more)
    async with await KafkaEventLog.connect(config) as fresh:
        for view in (log, fresh):
            assert await _read(view, "on", after_seq=3) == [4, 5]
            assert await _read(view, "on", after_seq=4) == [5]
            for after_seq in (0, 2):
                with pytest.raises(RunArchivedError):
                    await _read(view, "on", after_seq=after_seq)
            info = await view.get_run("on")
            assert (info.last_seq, info.archived, info.writer_epoch) == (5, True, epoch)
        await fresh.prune("on")
        for view in (log, fresh):
            with pytest.raises(RunArchivedError):
                await _read(view, "on", after_seq=3)
            assert await _read(view, "on", after_seq=5) == []
            assert (await view.get_run("on")).last_seq == 5


async def test_a_missing_seq_is_named(log: KafkaEventLog, config: KafkaConfig) -> None:
    """Seq 3 never reached the topic (written around the log): reading names it."""
    epoch = await log.claim_writer("holed", owner="seed")
    events = _run("holed", 5, epoch)
    await log.append(events[:2])
    raw = AIOKafkaProducer(bootstrap_servers=config.bootstrap_servers)
    await raw.start()
    try:
        for event in events[3:]:
            await raw.send_and_wait(
                f"{config.name}.events", encode_event(event), key=b"holed", partition=0
            )
    finally:
        await raw.stop()
    with pytest.raises(CorruptEventError) as caught:
        await _read(log, "holed")
    assert (caught.value.run_id, caught.value.seq) == ("holed", 3)
    assert "missing" in str(caught.value)
    assert await _read(log, "holed", after_seq=3) == [4, 5]
