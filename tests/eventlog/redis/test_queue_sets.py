"""The Redis log's queue sets (redis/_queues.py): a queue's admission read
answers what the rule (every queued and running run listed) answers, as runs
are queued, claimed, admitted, released and ended, and on a log written
before the sets existed, once they are built."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from agentlog.eventlog._row_format import to_us
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import Event, RunAdmitted, RunCompleted, RunStarted, utcnow
from agentlog.eventlog.redis import RedisEventLog
from agentlog.runtime import Queue
from agentlog.runtime._queue_admission import read_queue
from agentlog.testing import T0

pytestmark = pytest.mark.redis

QUEUE = Queue("emails", concurrency=3)
NAMES = ["mail"]


def _start(run_id: str, workflow: str, queue: str, priority: int, at: int) -> Event:
    limits = {"queue": {"name": queue, "priority": priority}} if queue else {}
    data = RunStarted(workflow, "1.0", {}, "sync", "fp1", limits, [])
    return Event(run_id, 1, data, ts=T0 + timedelta(seconds=at))


async def _open(url: str) -> RedisEventLog:
    log = await open_log(url)
    assert isinstance(log, RedisEventLog)
    return log


async def _admit(log: RedisEventLog, run_id: str, seq: int = 2) -> int:
    """Claim the run with a lease of a minute and record its admission."""
    epoch = await log.claim_writer(run_id, owner="w", lease_seconds=60)
    await log.append([Event(run_id, seq, RunAdmitted("emails"), writer_epoch=epoch)])
    return epoch


async def _fill(log: RedisEventLog) -> None:
    runs = [  # run id, workflow, queue, priority, started (s after T0)
        ("q-late", "mail", "emails", 0, 9),
        ("q-b", "mail", "emails", 0, 3),
        ("q-a", "mail", "emails", 0, 3),  # same time as q-b: the run id decides
        ("q-urgent", "mail", "emails", -2, 20),
        ("q-low", "mail", "emails", 5, 1),
        ("q-mid", "mail", "emails", 1, 2),
        ("claimed", "mail", "emails", -5, 0),  # best ranked, but a writer holds it
        ("running", "mail", "emails", 0, 0),
        ("done", "mail", "emails", 0, 0),
        ("legacy", "mail", "", 0, 0),  # recorded with no queue: counted by its workflow
        ("other", "mail2", "other", -9, 0),  # another queue's
        ("moved", "mail", "other", -1, 4),  # another queue's, of one of our workflows
        ("sibling", "mail3", "emails", 0, 5),  # our queue's, of a workflow not registered
    ]
    for run_id, workflow, queue, priority, at in runs:
        await log.append([_start(run_id, workflow, queue, priority, at)])
    await log.claim_writer("claimed", owner="w", lease_seconds=60)
    await _admit(log, "running")
    epoch = await _admit(log, "done")
    await log.append([Event("done", 3, RunCompleted({}), writer_epoch=epoch)])
    await log.release_lease("done", epoch)
    await log.claim_writer("legacy", owner="w", lease_seconds=60)


async def _same_as_the_rule(log: RedisEventLog) -> list[str]:
    """Compare the sets' read with the rule's for a few limits, now and once
    every lease has run out; return the waiting runs' order (unlimited, now)."""
    order: list[str] = []
    for now in (utcnow(), utcnow() + timedelta(minutes=5)):
        rule = await read_queue(log, QUEUE, NAMES, now)  # lists every queued and running run
        for limit in (0, 1, 3, 50):
            holders, waiting = await log.queue_runs(QUEUE.name, NAMES, now, limit)
            assert sorted(i.run_id for i in holders) == sorted(rule.held), (now, limit)
            want = [i.run_id for i in rule.waiting[:limit]]
            assert [i.run_id for i in waiting] == want, (now, limit)
            assert waiting == list(rule.waiting[:limit])  # the rows themselves
        order = order or [i.run_id for i in rule.waiting]
    return order


async def test_a_queue_read_answers_as_the_rule_as_runs_move(redis_url: str) -> None:
    async with await _open(redis_url) as log:
        await _fill(log)
        order = await _same_as_the_rule(log)
        assert order == ["q-urgent", "moved", "q-a", "q-b", "sibling", "q-late", "q-mid", "q-low"]
        holders, _ = await log.queue_runs(QUEUE.name, NAMES, utcnow(), 1)
        assert {i.run_id for i in holders} == {"claimed", "running", "legacy"}

        # The best waiting run is admitted, a claim lets go, a run ends.
        await _admit(log, "moved")
        await log.release_lease("claimed", (await log.get_run("claimed")).writer_epoch)
        running = (await log.get_run("running")).writer_epoch
        await log.append([Event("running", 3, RunCompleted({}), writer_epoch=running)])
        order = await _same_as_the_rule(log)
        assert order[:2] == ["claimed", "q-urgent"]
        holders, _ = await log.queue_runs(QUEUE.name, NAMES, utcnow(), 1)
        assert {i.run_id for i in holders} == {"moved", "legacy"}  # an ended run holds no slot


async def test_a_log_written_before_the_queue_sets_reads_its_queues_after_building_them(
    redis_url: str, redis_prefix: str, raw: Any
) -> None:
    async with await _open(redis_url) as log:
        await _fill(log)
    # What an older agentlog leaves: the run hashes and sets, no queue sets.
    sets = [*await raw.keys(f"{redis_prefix}:qwait:*"), *await raw.keys(f"{redis_prefix}:qheld:*")]
    assert len(sets) >= 6
    await raw.delete(*sets, f"{redis_prefix}:queues-built")

    async with await _open(redis_url) as log:
        await _same_as_the_rule(log)
        assert await raw.get(f"{redis_prefix}:queues-built") == b"1"
        assert await raw.zcard(f"{redis_prefix}:qwait:q:emails") == 8
        # Appends and claims go on keeping them.
        await _admit(log, "q-urgent")
        await _same_as_the_rule(log)
        assert await raw.zcard(f"{redis_prefix}:qwait:q:emails") == 7

        # An older agentlog writes meanwhile, keeping no sets: it ends the best
        # waiting run, queues one more and claims another.
        await raw.hset(f"{redis_prefix}:run:moved", "status", "completed")
        status = f"{redis_prefix}:status"
        await raw.smove(f"{status}:queued", f"{status}:completed", "moved")
        q_a = f"{to_us(T0 + timedelta(seconds=3)):020d}:q-a"  # as if recorded by it
        await raw.zrem(f"{redis_prefix}:qwait:q:emails", q_a)
        await raw.zrem(f"{redis_prefix}:qwait:w:mail", q_a)
        late = to_us(utcnow() + timedelta(minutes=1))
        await raw.hset(f"{redis_prefix}:run:q-b", "lease_expires_at", str(late))
        holders, waiting = await log.queue_runs(QUEUE.name, NAMES, utcnow(), 2)
        assert "q-b" not in {i.run_id for i in holders}  # the sets missed its claim
        assert [i.run_id for i in waiting] == ["sibling", "q-late"]  # and "q-a"
        await raw.delete(f"{redis_prefix}:queues-built")  # what the docs say to do then
        await _same_as_the_rule(log)
        assert await raw.get(f"{redis_prefix}:queues-built") == b"1"
        assert await raw.zcard(f"{redis_prefix}:qwait:q:emails") == 7  # "q-a" back
        assert await raw.zcard(f"{redis_prefix}:qwait:w:mail") == 6  # "moved" gone
        assert await raw.zscore(f"{redis_prefix}:qheld:q:emails", "q-b") == late
