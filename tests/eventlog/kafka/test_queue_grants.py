"""A queue's admitter on the real broker: one fenced process grants its slots.

The owner of the queue name's partition answers every ask for a slot in its
own transactions, with the queue's table on the runs topic: at most
``concurrency`` runs hold a slot, at most ``rate.runs`` first admissions in
a window, a renewal keeps the slot and its grant time, a release frees it,
and a new owner of the partition (the old one closed) reads the slots
granted before it and gives none of them twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from agentlog.errors import BackendUnavailableError
from agentlog.eventlog._base import RunInfo
from agentlog.eventlog._queue_slots import SlotAsk, SlotGrant
from agentlog.eventlog.events import Event, RunStatus, utcnow
from agentlog.eventlog.kafka._admin import partition_for
from agentlog.eventlog.kafka._commands import decode_answer
from agentlog.eventlog.kafka._grouplog import PartitionedKafkaEventLog
from agentlog.eventlog.kafka._ownership import PartitionOwner
from agentlog.eventlog.kafka._queue_grants import (
    QueueTable,
    decide,
    decode_ask,
    decode_table,
    encode_table,
    expire,
    queue_key,
    release,
)
from tests.eventlog.kafka.group_support import (
    PARTITIONS,
    SETTLE_S,
    CommitInDoubt,
    committed_records,
    open_log,
    settle,
    split,
    started,
)

#: Longer than any wait of these tests: a slot granted here never lapses in one.
LONG_S = 120.0


def _ask(run_id: str, queue: str = "q", **kwargs: object) -> SlotAsk:
    fields: dict[str, object] = {"lease_s": LONG_S, "first": True, **kwargs}
    return SlotAsk(queue, run_id, **fields)  # type: ignore[arg-type]


# -- the rules, without a broker ----------------------------------------------------------


def test_a_queue_grants_at_most_its_concurrency_and_renews_a_held_slot() -> None:
    table, now = QueueTable(), utcnow()
    grants = [decide(table, _ask(f"r{n}", concurrency=2), now, []) for n in range(3)]
    assert [g is not None for g in grants] == [True, True, False]
    later = now + timedelta(seconds=5)
    renewed = decide(table, _ask("r0", concurrency=2, first=False), later, [])
    assert renewed is not None and grants[0] is not None
    assert renewed.granted_at == grants[0].granted_at  # a renewal keeps the grant's time
    assert renewed.expires_at > grants[0].expires_at
    assert decode_table(encode_table(table)) == table


def test_a_renewal_or_a_release_keeps_the_rate_window() -> None:
    """Renewals and releases carry no rate: answering them must not forget the
    first admissions of the window (1 per hour: B waits however A goes on)."""
    table, now = QueueTable(), utcnow()
    rate = {"rate_runs": 1, "rate_per_s": 3600.0}
    expire(table, now, rate["rate_per_s"])
    assert decide(table, _ask("a", **rate), now, []) is not None
    later = now + timedelta(seconds=5)
    expire(table, later, None)  # A's renewal, as the admitter answers it
    assert decide(table, _ask("a", first=False), later, []) is not None
    expire(table, later, rate["rate_per_s"])
    assert decide(table, _ask("b", **rate), later, []) is None
    expire(table, later, None)  # A ends: its release
    table.slots.pop("a", None)
    expire(table, later, rate["rate_per_s"])
    assert decide(table, _ask("b", **rate), later, []) is None
    past = now + timedelta(hours=1, seconds=1)
    expire(table, past, rate["rate_per_s"])
    assert decide(table, _ask("b", **rate), past, []) is not None


def test_a_zombie_writer_can_neither_renew_nor_release_its_successors_slot() -> None:
    """After a takeover the run's new writer (a newer epoch) holds its slot: the
    old writer's late renewal is refused and its late release frees nothing,
    so a second run of a one-slot queue still waits."""
    table, now = QueueTable(), utcnow()
    assert decide(table, _ask("r", concurrency=1, epoch=1), now, []) is not None
    later = now + timedelta(seconds=5)
    assert decide(table, _ask("r", concurrency=1, first=False, epoch=2), later, []) is not None
    assert decide(table, _ask("r", concurrency=1, first=False, epoch=1), later, []) is None
    release(table, _ask("r", first=False, epoch=1))
    assert decide(table, _ask("s", concurrency=1, epoch=1), later, []) is None
    release(table, _ask("r", first=False, epoch=2))  # its own writer's release frees it
    assert decide(table, _ask("s", concurrency=1, epoch=1), later, []) is not None
    assert decode_table(encode_table(table)) == table


def test_a_first_admission_waits_for_a_run_ranked_ahead() -> None:
    table, now = QueueTable(), utcnow()
    ahead = RunInfo("urgent", priority=0, started_at=now, status=RunStatus.QUEUED)
    assert decide(table, _ask("late", priority=3, started_at=now), now, [ahead]) is None
    assert decide(table, _ask("urgent", priority=0, started_at=now), now, [ahead]) is not None
    # once the urgent run holds its slot, the next in rank goes
    assert decide(table, _ask("late", priority=3, started_at=now), now, [ahead]) is not None
    # a run admitted before (resumed) is not ranked
    assert decide(table, _ask("old", priority=9, first=False), now, [ahead]) is not None


# -- the admitter on the broker -------------------------------------------------------------


@pytest.fixture
async def fleet(
    kafka_bootstrap: str, kafka_name: str
) -> AsyncIterator[list[PartitionedKafkaEventLog]]:
    """Two group members (the workers) and a client, in this process."""
    logs: list[PartitionedKafkaEventLog] = []
    try:
        for _ in range(2):
            logs.append(await open_log(kafka_bootstrap, kafka_name, "g"))
        await settle(logs, split(logs), "the members split the partitions")
        logs.append(await open_log(kafka_bootstrap, kafka_name))
        yield logs
    finally:
        for log in logs:
            with contextlib.suppress(Exception):
                await log.close()


async def _granted_soon(client: PartitionedKafkaEventLog, ask: SlotAsk) -> None:
    """Ask until granted (a release is sent, not waited for); fail after SETTLE_S."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE_S
    while await client.hold_slot(ask) is None:
        assert loop.time() < deadline, f"{ask.run_id} got no slot within {SETTLE_S}s"
        await asyncio.sleep(0.1)


@pytest.mark.kafka
@pytest.mark.timeout(300)
async def test_the_admitter_grants_at_most_the_concurrency(
    fleet: list[PartitionedKafkaEventLog],
) -> None:
    client = fleet[-1]
    asks = [_ask(f"r{n}", concurrency=2) for n in range(5)]
    grants = await asyncio.gather(*(client.hold_slot(ask) for ask in asks))
    held = [ask for ask, grant in zip(asks, grants, strict=True) if grant is not None]
    refused = [ask for ask, grant in zip(asks, grants, strict=True) if grant is None]
    assert len(held) == 2, grants
    first = next(grant for grant in grants if grant is not None)
    again = await client.hold_slot(dataclasses.replace(held[0], first=False))
    assert again is not None and again.granted_at == first.granted_at
    assert await client.hold_slot(refused[0]) is None  # still full
    await client.release_slot("q", held[0].run_id)
    await _granted_soon(client, refused[0])
    assert await client.hold_slot(refused[1]) is None  # full again: one freed, one taken


@pytest.mark.kafka
@pytest.mark.timeout(300)
async def test_a_rate_counts_first_admissions_only(fleet: list[PartitionedKafkaEventLog]) -> None:
    client = fleet[-1]
    paced = {"rate_runs": 2, "rate_per_s": 3600.0}
    grants = [await client.hold_slot(_ask(f"p{n}", "paced", **paced)) for n in range(3)]
    assert [grant is not None for grant in grants] == [True, True, False]
    resumed = _ask("p-old", "paced", first=False, **paced)  # admitted before: not counted
    assert await client.hold_slot(resumed) is not None


@pytest.mark.kafka
@pytest.mark.timeout(300)
async def test_a_new_admitter_keeps_the_slots_granted_before_it(
    fleet: list[PartitionedKafkaEventLog],
) -> None:
    members, client = fleet[:2], fleet[-1]
    asks = [_ask(f"t{n}", "taken", concurrency=2) for n in range(3)]
    assert await client.hold_slot(asks[0]) is not None
    assert await client.hold_slot(asks[1]) is not None
    admitter_partition = partition_for("taken", PARTITIONS)
    old = next(m for m in members if admitter_partition in m.owned_partitions)
    new = next(m for m in members if m is not old)
    await old.close()  # leaves the group: the other member owns the partition next
    await settle([new], lambda: admitter_partition in new.owned_partitions, "takeover")
    assert await client.hold_slot(asks[2]) is None, "a slot granted before was given again"
    await client.release_slot("taken", asks[0].run_id)
    await _granted_soon(client, asks[2])


# -- a commit in doubt on the admitter's partition --------------------------------------------


@pytest.fixture
async def lone(
    kafka_bootstrap: str, kafka_name: str
) -> AsyncIterator[tuple[PartitionedKafkaEventLog, PartitionedKafkaEventLog]]:
    """One group member owning every partition, and a client."""
    logs: list[PartitionedKafkaEventLog] = []
    try:
        member = await open_log(kafka_bootstrap, kafka_name, "g")
        logs.append(member)
        await settle(logs, lambda: len(member.owned_partitions) == PARTITIONS, "member")
        logs.append(await open_log(kafka_bootstrap, kafka_name))
        yield logs[0], logs[1]
    finally:
        for log in logs:
            with contextlib.suppress(Exception):
                await log.close()


def _admitter_of(member: PartitionedKafkaEventLog, queue: str) -> PartitionOwner:
    assert member.member is not None
    return member.member.owners[partition_for(queue, PARTITIONS)]


async def _answered_once(
    bootstrap: str, log: PartitionedKafkaEventLog, queue: str, grant: SlotGrant
) -> None:
    """Every ask of ``queue``'s partition has one reply on record, and the queue's
    table on record holds ``grant`` (x's slot) as its reply said."""
    partition = partition_for(queue, PARTITIONS)
    answers: dict[int, int] = {}
    for record in await committed_records(bootstrap, log.layout.commands, partition):
        if decode_ask(record.value) is not None:
            answers.setdefault(record.offset, 0)
        elif (reply := decode_answer(record.value)) is not None:
            answers[reply[0]] = answers.get(reply[0], 0) + 1
    assert answers and set(answers.values()) == {1}, f"replies per ask: {answers}"
    tables = [
        r.value
        for r in await committed_records(bootstrap, log.layout.runs, partition)
        if r.key == queue_key(queue)
    ]
    slot = decode_table(tables[-1]).slots["x"]
    assert (slot[1], slot[0]) == (grant.granted_at, grant.expires_at), "not the slot x was told"


@pytest.mark.kafka
@pytest.mark.timeout(300)
@pytest.mark.parametrize("landed", [False, True], ids=["aborted", "landed"])
async def test_an_ask_after_another_writes_commit_in_doubt_is_answered(
    lone: tuple[PartitionedKafkaEventLog, PartitionedKafkaEventLog],
    kafka_bootstrap: str,
    landed: bool,
) -> None:
    """A run's append on the admitter's partition fails in doubt; the admitter's
    next answer is the commit that settles it (the owner reopens its producer and
    reads its commands' offsets again). That answer is sent, once, with the grant
    it records: the run is not left waiting for a reply that never comes."""
    member, client = lone
    owner = _admitter_of(member, "q")
    run = next(
        r
        for r in (f"r-{n}" for n in range(200))
        if member.layout.partition_of(r) == owner.partition
    )
    epoch = await member.claim_writer(run, owner="test")
    CommitInDoubt(owner, landed)
    with pytest.raises(BackendUnavailableError):
        await member.append([Event(run, 1, started(), writer_epoch=epoch)])

    grant = await client.hold_slot(_ask("x", concurrency=1, lease_s=SETTLE_S))
    assert grant is not None, "the only slot of an empty queue was refused"
    assert await client.hold_slot(_ask("y", concurrency=1)) is None, "x's slot not on record"
    await _answered_once(kafka_bootstrap, member, "q", grant)


@pytest.mark.kafka
@pytest.mark.timeout(300)
@pytest.mark.parametrize("landed", [False, True], ids=["aborted", "landed"])
async def test_an_ask_whose_commit_is_in_doubt_gets_one_answer_on_record(
    lone: tuple[PartitionedKafkaEventLog, PartitionedKafkaEventLog],
    kafka_bootstrap: str,
    landed: bool,
) -> None:
    """The transaction of the admitter's answer fails in doubt. Aborted, the ask
    is decided again from the table as committed; landed, its answer is on record
    already and is not sent twice (a second decision could say otherwise)."""
    member, client = lone
    owner = _admitter_of(member, "q")
    doubt = CommitInDoubt(owner, landed)
    grant = await client.hold_slot(_ask("x", concurrency=1, lease_s=SETTLE_S))
    assert doubt.failed == 1
    assert grant is not None, "the only slot of an empty queue was refused"
    assert await client.hold_slot(_ask("y", concurrency=1)) is None, "x's slot not on record"
    await _answered_once(kafka_bootstrap, member, "q", grant)
