"""What a run's transaction carries, for :meth:`Transactions.commit`.

* :class:`EventsCommit`: a batch of events, plus the run's index entry when
  due (a new run, a status change, or ``index_every`` events without one).
* :class:`IndexCommit`: the index entry alone: a claim (a new epoch) or a
  lease change.

Each also says, from the run's tail after a failure, whether it landed (see
:class:`~agentlog.eventlog.kafka._txn.Verdict`). A batch of events may be
taken as landed only when the failure left it in doubt: after a fence it
cannot have committed, and the same seqs on the tail are another writer's.
An index entry is recognised by its content (epoch, lease owner and expiry).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

from agentlog.errors import ConflictError, EventLogError, FencedError
from agentlog.eventlog._base import RunInfo
from agentlog.eventlog.events import Event
from agentlog.eventlog.kafka._admin import TopicLayout
from agentlog.eventlog.kafka._records import IndexEntry, encode_index, index_key
from agentlog.eventlog.kafka._txn import RunProducer, Verdict

__all__ = ["EventsCommit", "IndexCommit"]


@dataclasses.dataclass(frozen=True)
class EventsCommit:
    """A batch of one run's events at one epoch, already encoded."""

    run_id: str
    batch: list[tuple[Event, bytes]]
    layout: TopicLayout
    index_every: int

    @property
    def first(self) -> int:
        return self.batch[0][0].seq

    @property
    def last(self) -> int:
        return self.batch[-1][0].seq

    @property
    def epoch(self) -> int:
        return self.batch[0][0].writer_epoch

    def describe(self) -> str:
        return f"the append at seq {self.first}"

    async def send(
        self, writer: RunProducer, sent: list[asyncio.Future[Any]]
    ) -> Callable[[], None]:
        producer, key = writer.producer, writer.run_id.encode()
        info = writer.committed.after([event for event, _ in self.batch])
        with_index = (
            not writer.has_entry
            or writer.first_offset < 0  # the entry must say where the events start
            or info.status != writer.committed.status
            or writer.since_index + len(self.batch) >= self.index_every
        )
        # Records per record batch; one record batch's offsets are consecutive,
        # so its base offset gives every event's offset.
        counts: list[int] = []
        builder, count = producer.create_batch(), 0
        for _event, value in self.batch:
            if builder.append(key=key, value=value, timestamp=None) is None:
                sent.append(await self._send_batch(writer, builder))
                counts.append(count)
                # The first record of a batch always fits, however large.
                builder, count = producer.create_batch(), 0
                builder.append(key=key, value=value, timestamp=None)
            count += 1
        sent.append(await self._send_batch(writer, builder))
        counts.append(count)
        batches = list(sent)
        first_offset = writer.first_offset
        if with_index:
            metas = await asyncio.gather(*batches)
            first_offset = first_offset if first_offset >= 0 else metas[0].offset
            last = metas[-1].offset + counts[-1] - 1
            entry = IndexEntry(
                info, writer.partition, first_offset, last + 1, archived_seq=writer.archived_seq
            )
            sent.append(
                await producer.send(
                    self.layout.runs,
                    encode_index(entry),
                    key=index_key(writer.run_id),
                    partition=self.layout.runs_partition(writer.run_id),
                )
            )

        def applied() -> None:
            base = batches[0].result().offset
            writer.first_offset = first_offset if first_offset >= 0 else base
            writer.offset = batches[-1].result().offset + counts[-1]
            writer.committed, writer.has_entry = info, writer.has_entry or with_index
            writer.since_index = 0 if with_index else writer.since_index + len(self.batch)

        return applied

    async def _send_batch(self, writer: RunProducer, builder: Any) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = await writer.producer.send_batch(
            builder, self.layout.events, partition=writer.partition
        )
        return future

    def judge(self, tail: RunInfo, *, in_doubt: bool) -> Verdict | EventLogError:
        if tail.writer_epoch > self.epoch:
            return self.fenced(tail)
        if in_doubt and tail.last_seq >= self.last:
            return Verdict.LANDED
        if tail.last_seq == self.first - 1:
            return Verdict.UNCHANGED
        return ConflictError(self.run_id, tail.last_seq + 1, self.first)

    def fenced(self, tail: RunInfo) -> FencedError:
        return FencedError(self.run_id, self.epoch, max(tail.writer_epoch, self.epoch))


@dataclasses.dataclass(frozen=True)
class IndexCommit:
    """A new index entry for the run: the committed tail with a new claim or lease."""

    run_id: str
    layout: TopicLayout
    #: The epoch the tail had when this commit was asked for.
    base_epoch: int
    epoch: int
    lease_owner: str
    lease_expires_at: datetime | None

    @property
    def claim(self) -> bool:
        """A claim (a new epoch), not a lease change of the current one."""
        return self.epoch > self.base_epoch

    def describe(self) -> str:
        if self.claim:
            return f"the claim of epoch {self.epoch}"
        return f"the lease change of epoch {self.epoch}"

    async def send(
        self, writer: RunProducer, sent: list[asyncio.Future[Any]]
    ) -> Callable[[], None]:
        # Built from the tail as of this attempt: a reopen may have moved it on.
        info = dataclasses.replace(
            writer.committed,
            writer_epoch=self.epoch,
            lease_owner=self.lease_owner,
            lease_expires_at=self.lease_expires_at,
        )
        entry = IndexEntry(
            info,
            writer.partition,
            writer.first_offset,
            writer.offset,
            archived_seq=writer.archived_seq,
        )
        sent.append(
            await writer.producer.send(
                self.layout.runs,
                encode_index(entry),
                key=index_key(self.run_id),
                partition=self.layout.runs_partition(self.run_id),
            )
        )

        def applied() -> None:
            writer.committed, writer.has_entry = info, True

        return applied

    def judge(self, tail: RunInfo, *, in_doubt: bool) -> Verdict | EventLogError:
        if (tail.writer_epoch, tail.lease_owner, tail.lease_expires_at) == (
            self.epoch,
            self.lease_owner,
            self.lease_expires_at,
        ):
            return Verdict.LANDED
        if tail.writer_epoch == self.base_epoch:
            return Verdict.UNCHANGED
        return self.fenced(tail)

    def fenced(self, tail: RunInfo) -> FencedError:
        # A claim that lost the race names its own epoch (claim_writer claims
        # again); a lease change names the epoch it held.
        epoch = self.epoch if self.claim else self.base_epoch
        return FencedError(self.run_id, epoch, max(tail.writer_epoch, epoch))
