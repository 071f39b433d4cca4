"""A queue's admitter: the owner of the queue's partition grants its slots.

On a partitioned Kafka log no worker sees the others' claims, so each queue
is counted by one process: the owner of partition ``a`` =
:func:`~agentlog.eventlog.kafka._admin.partition_for` of the queue's name
(the *admitter*). Every admission decision of the queue is made here and
committed in a transaction of that partition's owner producer:

* **Asks** are records on commands partition ``a`` (key: the run id; value a
  msgpack map ``{ask: "hold" | "release", queue, run_id, ...}``, see
  :class:`~agentlog.eventlog._queue_slots.SlotAsk`), taken by the owner's
  group consumer like any command.
* **The queue's table** (each slot's run and expiry, and the times of the
  first admissions within the rate's period) is one record on the compacted
  runs topic, key ``q:<queue>``, partition ``a``, rewritten whole in the same
  transaction as the replies it decides (``{reply_to, applied, granted_at,
  expires_at}``) and the asks' consumed offset. So a reply a run's owner
  reads (``read_committed``) is a grant on record.
* **Fenced on takeover.** A new owner of ``a`` opens the partition's
  transactional id first (``init_transactions`` fences the old admitter and
  aborts its open transaction) and only then reads the table: a zombie
  admitter cannot commit a grant the new one does not see. After a commit in
  doubt the table is read again, once the owner has settled it.

What one admitter guarantees, on its own clock: never more than
``concurrency`` runs hold an unexpired slot; never more than ``rate.runs``
first admissions granted within any window of ``rate.per``; a first
admission is refused while a queued run ranked ahead of it (the run index,
read across partitions) holds no slot. A slot lasts ``lease_s`` from its
grant or last renewal; a run's owner renews it with its lease and never
acts past it by its own clock (a deadline counted from before it asked), so
a slot whose holder died is free again after one lease, and never held by
two runs at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from agentlog._logging import get_logger
from agentlog.errors import AgentlogError
from agentlog.eventlog._base import RunInfo
from agentlog.eventlog._packing import pack, unpack
from agentlog.eventlog._queue_slots import SlotAsk, SlotGrant, rank, rank_of
from agentlog.eventlog.events import RunStatus, utcnow
from agentlog.eventlog.kafka._changes import Change
from agentlog.eventlog.kafka._ownership import PartitionOwner
from agentlog.eventlog.kafka._reader import KafkaReader

__all__ = [
    "QueueAdmitter",
    "QueueTable",
    "decide",
    "decode_ask",
    "decode_grant",
    "decode_table",
    "encode_ask",
    "encode_table",
    "queue_key",
]

_log = get_logger(__name__)

#: A release is an ask too: ``SlotAsk`` with ``lease_s`` 0 and ``first`` False.
RELEASE = "release"
HOLD = "hold"


def queue_key(queue: str) -> bytes:
    """The runs-topic key of a queue's table."""
    return f"q:{queue}".encode()


def encode_ask(ask: SlotAsk, kind: str = HOLD) -> bytes:
    """The commands-topic value of an ask."""
    fields = {f.name: getattr(ask, f.name) for f in dataclasses.fields(SlotAsk)}
    return pack({"ask": kind, **fields}, path="queue ask")


def decode_ask(raw: bytes | None) -> tuple[str, SlotAsk] | None:
    """``(kind, ask)`` if ``raw`` is an ask, else None (a command or a reply)."""
    try:
        value = unpack(raw or b"")
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("ask") not in (HOLD, RELEASE):
        return None
    names = {f.name for f in dataclasses.fields(SlotAsk)}
    try:
        ask = SlotAsk(**{k: v for k, v in value.items() if k in names})
    except TypeError:
        return None
    if not (isinstance(ask.queue, str) and isinstance(ask.run_id, str)):
        return None
    return str(value["ask"]), ask


def encode_grant(offset: int, grant: SlotGrant | None) -> bytes:
    """The reply to the ask at ``offset``: applied with the grant, or refused."""
    if grant is None:
        return pack({"reply_to": offset, "applied": False}, path="reply")
    return pack(
        {
            "reply_to": offset,
            "applied": True,
            "granted_at": grant.granted_at,
            "expires_at": grant.expires_at,
        },
        path="reply",
    )


def decode_grant(extra: dict[str, Any]) -> SlotGrant | None:
    """The grant a reply carries, if it has one."""
    granted, expires = extra.get("granted_at"), extra.get("expires_at")
    if isinstance(granted, datetime) and isinstance(expires, datetime):
        return SlotGrant(granted, expires)
    return None


@dataclass
class QueueTable:
    """What one queue's admitter counts (see the module docstring)."""

    slots: dict[str, tuple[datetime, datetime, int]] = field(default_factory=dict)
    """run id -> (expires_at, granted_at of its slot, the holding writer's epoch)."""
    firsts: list[datetime] = field(default_factory=list)
    """The grant times of first admissions, within the rate's period."""


def encode_table(table: QueueTable) -> bytes:
    slots = {run_id: list(slot) for run_id, slot in table.slots.items()}
    return pack({"slots": slots, "firsts": table.firsts}, path="queue table")


def decode_table(raw: bytes) -> QueueTable:
    """Rebuild a queue's table. Raises ValueError on bytes that do not fit."""
    value = unpack(raw)
    if not isinstance(value, dict):
        raise ValueError("queue table is not a map")
    slots, firsts = value.get("slots"), value.get("firsts")
    if not isinstance(slots, dict) or not isinstance(firsts, list):
        raise ValueError("queue table fields have the wrong types")
    table = QueueTable()
    for run_id, pair in slots.items():
        if not (isinstance(pair, list) and len(pair) in (2, 3)):  # 2: before epochs
            raise ValueError(f"queue table: slot of {run_id!r} does not fit")
        table.slots[str(run_id)] = (pair[0], pair[1], int(pair[2]) if len(pair) == 3 else 0)
    table.firsts = [at for at in firsts if isinstance(at, datetime)]
    return table


def _order(asked: tuple[int, str, SlotAsk]) -> tuple[bool, tuple[int, datetime, str], int]:
    offset, kind, ask = asked
    first = kind == HOLD and ask.first
    place = rank(ask.priority, ask.started_at, ask.run_id) if first else rank(0, None, "")
    return (first, place, offset)


def decide(
    table: QueueTable, ask: SlotAsk, now: datetime, queued: list[RunInfo]
) -> SlotGrant | None:
    """Grant, renew or refuse one hold ask; updates ``table``.

    Args:
        queued: the queue's runs the run index lists as ``queued`` (for ranks).
    """
    held = table.slots.get(ask.run_id)
    expires = now + timedelta(seconds=ask.lease_s)
    if held is not None:  # it holds a slot: renewed (a first admission keeps its time)
        if ask.epoch < held[2]:
            return None  # an older writer of the run (a zombie): the slot is the newer one's
        table.slots[ask.run_id] = (expires, held[1], ask.epoch)
        return SlotGrant(held[1], expires)
    if ask.concurrency is not None and len(table.slots) >= ask.concurrency:
        return None
    if ask.first:
        if ask.rate_runs is not None and len(table.firsts) >= ask.rate_runs:
            return None
        mine = rank(ask.priority, ask.started_at, ask.run_id)
        for info in queued:
            theirs = rank_of(info)
            if info.run_id not in table.slots and theirs < mine:
                return None  # a run ranked ahead of it waits: that one first
        if ask.rate_per_s is not None:  # only a queue with a rate counts them
            table.firsts.append(now)
    table.slots[ask.run_id] = (expires, now, ask.epoch)
    return SlotGrant(now, expires)


def release(table: QueueTable, ask: SlotAsk) -> None:
    """Free the run's slot, unless a newer writer of the run holds it (the
    release of a zombie after a takeover frees nothing)."""
    held = table.slots.get(ask.run_id)
    if held is not None and ask.epoch >= held[2]:
        del table.slots[ask.run_id]


def expire(table: QueueTable, now: datetime, rate_per_s: float | None) -> None:
    """Drop the slots whose lease ended and the first admissions out of the window.

    ``rate_per_s`` is the asker's: None on a renewal or a release (they carry
    no rate), which leaves the window as it is.
    """
    table.slots = {r: s for r, s in table.slots.items() if s[0] > now}
    if rate_per_s is not None:
        since = now - timedelta(seconds=rate_per_s)
        table.firsts = [at for at in table.firsts if at > since]


class QueueAdmitter:
    """Answers the asks of the queues whose partition ``owner`` owns."""

    def __init__(self, owner: PartitionOwner, reader: KafkaReader) -> None:
        self.owner = owner
        self._reader = reader
        self._asks: list[tuple[int, str, SlotAsk]] = []
        self._tables: dict[str, QueueTable] | None = None
        self._task: asyncio.Task[None] | None = None
        self._failed = False

    def asked(self, offset: int, kind: str, ask: SlotAsk) -> None:
        """An ask taken from the owner's commands partition: answer it soon."""
        self._asks.append((offset, kind, ask))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(
                self._answer_all(), name=f"kafka-queue-admitter-{self.owner.partition}"
            )

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _answer_all(self) -> None:
        while self._asks and self.owner.alive:
            batch, self._asks = self._asks, []
            try:
                await self._answer(batch)
            except Exception as exc:  # never die: an ask left unanswered holds the partition
                if not self.owner.alive:
                    return  # the partition's next owner takes the asks again
                _log.warning("kafka_queue_asks_unanswered", error=repr(exc), asks=len(batch))
                self._asks = batch + self._asks  # decided again from the table as committed
                self._failed = True
                await asyncio.sleep(0.5)

    async def _tables_now(self) -> dict[str, QueueTable]:
        """The tables as committed: read once per ownership, and after a commit in doubt."""
        if self._failed:  # let the owner settle the transaction in doubt first
            await self.owner.submit(Change(""))
            self._tables, self._failed = None, False
        if self._tables is None:
            p = self.owner.partition
            await self._reader.catch_up([p])
            tables: dict[str, QueueTable] = {}
            for name, raw in self._reader.queue_records(p).items():
                try:
                    tables[name] = decode_table(raw)
                except ValueError as exc:  # never grant from a table we cannot read
                    raise AgentlogError(
                        f"queue {name!r}: its table does not decode: {exc}"
                    ) from exc
            self._tables = tables
        return self._tables

    async def _answer(self, batch: list[tuple[int, str, SlotAsk]]) -> None:
        tables = await self._tables_now()
        # An ask no longer outstanding was answered on record: by a transaction
        # that failed in doubt but landed (settled by now). Never decided twice.
        outstanding = self.owner.commands.outstanding
        batch = [asked for asked in batch if asked[0] in outstanding]
        if not batch:
            return
        now = utcnow()
        queued: list[RunInfo] | None = None
        if any(kind == HOLD and ask.first for _, kind, ask in batch):
            entries = await self._reader.caught_up()
            queued = [e.info for e in entries if e.info.status == RunStatus.QUEUED]
        work = {
            name: dataclasses.replace(t, slots=dict(t.slots), firsts=list(t.firsts))
            for name, t in tables.items()
        }
        answers: dict[int, bytes | None] = {}
        # Releases and renewals as they were asked (a renewal sent before its
        # run's release must not outlive it), then first admissions best
        # ranked first: the best of them gets a free slot.
        order = sorted(batch, key=_order)
        for offset, kind, ask in order:
            table = work.setdefault(ask.queue, QueueTable())
            expire(table, now, ask.rate_per_s)
            if kind == RELEASE:
                release(table, ask)
                answers[offset] = encode_grant(offset, None)
                continue
            mine = [i for i in queued or [] if i.queue == ask.queue]
            answers[offset] = encode_grant(offset, decide(table, ask, now, mine))
        changed = [name for name in work if work[name] != tables.get(name)]
        records: list[tuple[bytes, bytes | None]] = [
            (queue_key(name), encode_table(work[name])) for name in changed
        ]
        # The replies go in the table's own transaction, or in none (see Change.answers).
        await self.owner.submit(Change("", records=records, answers=answers))
        self._tables = work
