"""One run's writer state and its Kafka transactions, for :mod:`agentlog.eventlog.kafka.writer`.

A :class:`RunWriter` holds a run's transactional producer and the tail it
knows to be true. :func:`send_events` commits one batch of events (plus the
index entry when due) in one transaction; :func:`send_index` commits an index
entry alone (a claim or a lease change). Both leave retrying, fencing and
reopening to the pool; a transaction interrupted by anything but a Kafka
error retires the writer (see :func:`_interrupted`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from agentlog.errors import AgentlogError, BackendUnavailableError
from agentlog.eventlog.base import RunInfo
from agentlog.eventlog.events import Event
from agentlog.eventlog.kafka.admin import TopicLayout
from agentlog.eventlog.kafka.records import IndexEntry, encode_index, index_key

__all__ = ["RunWriter", "send_events", "send_index"]


@dataclass(eq=False)
class RunWriter:
    """One run's producer and the tail it knows to be true."""

    run_id: str
    producer: AIOKafkaProducer
    partition: int
    first_offset: int
    offset: int
    committed: RunInfo
    has_entry: bool
    #: Seqs up to this one were archived and pruned (see ``IndexEntry.archived_seq``).
    archived_seq: int = 0
    since_index: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: Set once the writer must not be used again (fenced, or its producer in doubt).
    error: AgentlogError | None = None

    def adopt(self, fresh: RunWriter) -> None:
        """Take over ``fresh``'s producer and tail (after a reopen)."""
        self.producer, self.partition = fresh.producer, fresh.partition
        self.first_offset, self.offset = fresh.first_offset, fresh.offset
        self.committed, self.has_entry = fresh.committed, fresh.has_entry
        self.archived_seq = fresh.archived_seq
        self.since_index = 0


async def send_events(
    writer: RunWriter, batch: list[tuple[Event, bytes]], layout: TopicLayout, index_every: int
) -> None:
    """Commit ``batch`` in one transaction and advance the writer's tail.

    The index entry goes in the same transaction when the run is new, its
    status changes, or ``index_every`` events went by without one.
    """
    producer, key = writer.producer, writer.run_id.encode()
    info = writer.committed.after([event for event, _ in batch])
    with_index = (
        not writer.has_entry
        or writer.first_offset < 0  # the entry must say where the events start
        or info.status != writer.committed.status
        or writer.since_index + len(batch) >= index_every
    )
    # (base-offset future, records in that record batch); one record batch's
    # offsets are consecutive, which gives every event's offset.
    sent: list[tuple[asyncio.Future[Any], int]] = []
    try:
        await producer.begin_transaction()
        builder, count = producer.create_batch(), 0
        for _event, value in batch:
            if builder.append(key=key, value=value, timestamp=None) is None:
                sent.append((await _send_batch(writer, builder, layout), count))
                # The first record of a batch always fits, however large.
                builder, count = producer.create_batch(), 0
                builder.append(key=key, value=value, timestamp=None)
            count += 1
        sent.append((await _send_batch(writer, builder, layout), count))
        first_offset = writer.first_offset
        if with_index:
            metas = await asyncio.gather(*(future for future, _ in sent))
            first_offset = first_offset if first_offset >= 0 else metas[0].offset
            last = metas[-1].offset + sent[-1][1] - 1
            entry = IndexEntry(
                info, writer.partition, first_offset, last + 1, archived_seq=writer.archived_seq
            )
            await producer.send(
                layout.runs, encode_index(entry), key=index_key(writer.run_id), partition=0
            )
        await producer.commit_transaction()
    except BaseException as exc:
        for future, _ in sent:
            future.add_done_callback(_consume)
        _interrupted(writer, exc)
        raise
    base = sent[0][0].result().offset
    last = sent[-1][0].result().offset + sent[-1][1] - 1
    writer.first_offset = first_offset if first_offset >= 0 else base
    writer.offset = last + 1
    writer.committed, writer.has_entry = info, writer.has_entry or with_index
    writer.since_index = 0 if with_index else writer.since_index + len(batch)


async def _send_batch(writer: RunWriter, builder: Any, layout: TopicLayout) -> asyncio.Future[Any]:
    future: asyncio.Future[Any] = await writer.producer.send_batch(
        builder, layout.events, partition=writer.partition
    )
    return future


async def send_index(writer: RunWriter, info: RunInfo, layout: TopicLayout) -> None:
    """Commit ``info`` as the run's index entry, alone in one transaction."""
    entry = IndexEntry(
        info, writer.partition, writer.first_offset, writer.offset, archived_seq=writer.archived_seq
    )
    producer = writer.producer
    future: asyncio.Future[Any] | None = None
    try:
        await producer.begin_transaction()
        future = await producer.send(
            layout.runs, encode_index(entry), key=index_key(writer.run_id), partition=0
        )
        await producer.commit_transaction()
    except BaseException as exc:
        if future is not None:
            future.add_done_callback(_consume)
        _interrupted(writer, exc)
        raise


def _interrupted(writer: RunWriter, exc: BaseException) -> None:
    """Retire a writer whose transaction stopped half way for a non-Kafka reason.

    A cancelled task, a timeout (or any error outside aiokafka) can leave the
    producer in the middle of a transaction; the next use opens a fresh
    producer, whose init_transactions settles the one in doubt, and reads the
    true tail.
    """
    if not isinstance(exc, KafkaError) and writer.error is None:
        writer.error = BackendUnavailableError(
            f"run {writer.run_id!r}: a Kafka transaction was interrupted "
            f"({type(exc).__name__}); the writer reopens on next use"
        )


def _consume(future: asyncio.Future[Any]) -> None:
    # A send future of a failed transaction holds the same error; read it so
    # asyncio does not log "exception was never retrieved".
    if not future.cancelled():
        future.exception()
