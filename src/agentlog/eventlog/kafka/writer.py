"""Fenced, transactional writers of :class:`~agentlog.eventlog.kafka.KafkaEventLog`.

One :class:`RunWriter` per run this process writes, each with its own
transactional producer (transactional id ``<name>.writer.<run_id>``). Opening
one calls ``init_transactions``, which fences every other producer of the
run, and only then reads the run's tail, so the tail it keeps is the truth
until one of its own commits fails with ProducerFenced (see the module
docstring of :mod:`agentlog.eventlog.kafka` for why that rules out forks).

Every append commits before it returns, ``durable=False`` too: the
runtime's async durability mode already writes in the background with group
commit (``runtime/writer.py``), so a second queue here would only add a path
where a returned append is not yet recorded. A broker that goes away
mid-commit is retried until ``request_timeout_s``: the writer reopens
(fencing its own old producer, which completes or aborts the transaction in
doubt), re-reads the tail, and resends only what is not there, so nothing
committed is lost or duplicated.
"""

from __future__ import annotations

import asyncio
import dataclasses
import zlib
from typing import Any

import aiokafka.producer.sender as _aiokafka_sender
from aiokafka import AIOKafkaProducer
from aiokafka.errors import (
    InvalidProducerEpoch,
    InvalidTopicError,
    KafkaError,
    MessageSizeTooLargeError,
    ProducerFenced,
    RecordListTooLargeError,
)

from agentlog._logging import get_logger
from agentlog.errors import (
    AgentlogError,
    BackendUnavailableError,
    ConflictError,
    EventLogError,
    FencedError,
    UnknownRunError,
)
from agentlog.eventlog.base import RunInfo, check_next
from agentlog.eventlog.events import Event
from agentlog.eventlog.kafka.admin import MAX_RECORD_BYTES, TopicLayout
from agentlog.eventlog.kafka.clients import stop_quietly
from agentlog.eventlog.kafka.config import KafkaConfig
from agentlog.eventlog.kafka.reader import KafkaReader
from agentlog.eventlog.kafka.records import IndexEntry
from agentlog.eventlog.kafka.txn import RunWriter, send_events, send_index

__all__ = ["RunWriter", "WriterPool"]

log = get_logger(__name__)

_FENCED = (ProducerFenced, InvalidProducerEpoch)
# Errors that no retry can fix; any other error leaves a commit in doubt.
_REFUSED = (MessageSizeTooLargeError, RecordListTooLargeError, InvalidTopicError)

# aiokafka retries AddPartitionsToTxn after 20 ms when the broker answers
# CONCURRENT_TRANSACTIONS, which it does right after a commit until the
# transaction markers are written (a few ms). With one transaction per step
# that retry dominated: 28 ms per step against 7 ms with 2 ms. The constant is
# module-level in aiokafka 0.14, so this applies to every producer of the
# process.
_aiokafka_sender.BACKOFF_OVERRIDE = 0.002
_FENCE_RETRIES = 3
#: How long closing a discarded producer may take (it waits for its queue).
_STOP_S = 5.0


class WriterPool:
    """The run writers of one log instance."""

    def __init__(
        self, config: KafkaConfig, layout: TopicLayout, common: dict[str, Any], reader: KafkaReader
    ) -> None:
        self._config, self._layout, self._common, self._reader = config, layout, common, reader
        self._writers: dict[str, RunWriter] = {}
        self._fenced: dict[str, tuple[int, int]] = {}

    # -- opening ---------------------------------------------------------------------

    async def _producer(self, run_id: str) -> AIOKafkaProducer:
        producer = AIOKafkaProducer(
            **self._common,
            transactional_id=self._layout.writer_id(run_id),
            transaction_timeout_ms=int(self._config.transaction_timeout_s * 1000),
            max_request_size=MAX_RECORD_BYTES,
            max_batch_size=1024 * 1024,
        )
        try:
            async with asyncio.timeout(self._config.request_timeout_s):
                await producer.start()  # init_transactions: fences older producers
        except (TimeoutError, KafkaError, OSError) as exc:
            await stop_quietly(producer, _STOP_S)
            raise BackendUnavailableError(
                f"run {run_id!r}: cannot start a transactional producer at "
                f"{self._config.bootstrap_servers} ({type(exc).__name__}: {exc}); "
                "retry once the broker answers"
            ) from exc
        return producer

    async def _tail(self, run_id: str) -> tuple[IndexEntry | None, int]:
        entry = await self._reader.entry(run_id)
        if entry is None:
            return None, zlib.crc32(run_id.encode()) % self._layout.events_partitions
        return (await self._reader.exact(entry))[0], entry.partition

    async def _open(self, run_id: str) -> RunWriter:
        producer = await self._producer(run_id)
        try:
            entry, partition = await self._tail(run_id)
        except BaseException:
            await stop_quietly(producer, _STOP_S)
            raise
        if entry is None:
            return RunWriter(run_id, producer, partition, -1, -1, RunInfo(run_id), False)
        return RunWriter(
            run_id,
            producer,
            partition,
            entry.first_offset,
            entry.offset,
            entry.info,
            True,
            entry.archived_seq,
        )

    async def _reopen(self, writer: RunWriter) -> None:
        await stop_quietly(writer.producer, _STOP_S)
        writer.adopt(await self._open(writer.run_id))

    async def get(self, run_id: str) -> RunWriter:
        """This process's writer of the run, opened (and fencing) if needed."""
        writer = self._writers.get(run_id)
        if writer is None or writer.error is not None:
            if writer is not None:  # its producer may sit mid-transaction: retire it
                await stop_quietly(writer.producer, _STOP_S)
            writer = await self._open(run_id)
            self._writers[run_id] = writer
        return writer

    async def fresh(self, run_id: str) -> RunWriter:
        """A writer that fenced every other one just now, with the true tail."""
        writer = self._writers.get(run_id)
        if writer is None or writer.error is not None:
            return await self.get(run_id)
        async with writer.lock:
            await self._reopen(writer)
        return writer

    async def current(self, run_id: str, epoch: int) -> RunWriter:
        """The writer of ``epoch``; FencedError if a newer epoch owns the run."""
        self._check_fenced(run_id, epoch)
        writer = await self.get(run_id)
        if not writer.has_entry:
            raise UnknownRunError(run_id, f"topic {self._layout.runs}")
        check_next(run_id, 0, 1, epoch, writer.committed.writer_epoch)
        return writer

    def _check_fenced(self, run_id: str, epoch: int) -> None:
        fenced = self._fenced.get(run_id)
        if fenced is not None and epoch <= fenced[0]:
            raise FencedError(run_id, epoch, fenced[1])

    def _fence(self, run_id: str, epoch: int, current: int) -> FencedError:
        """Remember that ``epoch`` is fenced, so later calls fail without asking Kafka."""
        self._fenced[run_id] = (epoch, max(current, epoch))
        return FencedError(run_id, epoch, max(current, epoch))

    async def _retire(self, writer: RunWriter, error: AgentlogError) -> None:
        """Never use this writer again: later calls on it raise ``error``.

        Its producer may be fenced (aiokafka's FATAL_ERROR state, in which any
        further transaction fails with an AssertionError) or mid-transaction.
        """
        if writer.error is None:
            writer.error = error
        if self._writers.get(writer.run_id) is writer:
            del self._writers[writer.run_id]
        await stop_quietly(writer.producer, _STOP_S)

    # -- appending ---------------------------------------------------------------------

    async def append(
        self, run_id: str, events: list[Event], raw: list[bytes], first_seq: int, epoch: int
    ) -> None:
        """Check the batch against the tail and commit it before returning."""
        self._check_fenced(run_id, epoch)
        writer = await self.get(run_id)
        head = writer.committed
        if first_seq > head.last_seq + 1 or epoch > head.writer_epoch:
            # Our tail may be stale only if another process wrote: re-read it.
            writer = await self.fresh(run_id)
        async with writer.lock:
            if writer.error is not None:
                raise writer.error
            head = writer.committed
            check_next(run_id, head.last_seq, first_seq, epoch, head.writer_epoch)
            try:
                await self._commit(writer, list(zip(events, raw, strict=True)))
            except AgentlogError as exc:
                await self._retire(writer, exc)
                raise

    async def _commit(self, writer: RunWriter, batch: list[tuple[Event, bytes]]) -> None:
        """Commit the batch, across fences by same-epoch writers and broker restarts.

        The whole commit, retries included, takes at most ``request_timeout_s``.

        Raises:
            FencedError: a newer epoch owns the run.
            ConflictError: another writer of this epoch wrote these seqs.
            BackendUnavailableError: not confirmed in time; the batch may or
                may not be recorded (the writer reopens, which settles it).
            EventLogError: Kafka refused the batch (too large, say).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._config.request_timeout_s
        first = batch[0][0].seq
        try:
            async with asyncio.timeout_at(deadline):
                await self._commit_until_done(writer, batch, deadline)
        except TimeoutError as exc:
            raise BackendUnavailableError(
                f"run {writer.run_id!r}: append at seq {first} not confirmed within "
                f"{self._config.request_timeout_s:g}s (the broker does not answer). It may "
                "or may not be recorded: re-read the run once the broker answers, then retry."
            ) from exc

    async def _commit_until_done(
        self, writer: RunWriter, batch: list[tuple[Event, bytes]], deadline: float
    ) -> None:
        loop = asyncio.get_running_loop()
        run_id, first, epoch = writer.run_id, batch[0][0].seq, batch[0][0].writer_epoch
        fences = in_doubt = 0
        while True:
            try:
                await send_events(writer, batch, self._layout, self._config.index_every)
                self._reader.note_point(run_id, writer.committed.last_seq, writer.offset)
                return
            except _FENCED as exc:
                fences += 1
                entry, _ = await self._tail(run_id)
                current = entry.info if entry is not None else RunInfo(run_id)
                if current.writer_epoch > epoch or fences > _FENCE_RETRIES:
                    raise self._fence(run_id, epoch, current.writer_epoch) from exc
                if current.last_seq >= first:
                    raise ConflictError(run_id, current.last_seq + 1, first) from exc
                # Fenced by a writer of the same epoch that wrote nothing (or by a
                # reader that aborted a stalled transaction of ours): take it back.
            except KafkaError as exc:
                in_doubt += 0 if exc.retriable else 1
                if isinstance(exc, _REFUSED) or in_doubt > _FENCE_RETRIES:
                    raise EventLogError(
                        f"run {run_id!r}: Kafka refused the append at seq {first}: {exc}"
                    ) from exc
                log.warning("kafka_append_retry", run_id=run_id, seq=first, error=str(exc))
                await asyncio.sleep(0.5)
            try:
                await self._reopen(writer)
            except BackendUnavailableError:
                if loop.time() > deadline:
                    raise
                await asyncio.sleep(0.5)
                continue
            done = writer.committed
            if done.writer_epoch > epoch:
                raise self._fence(run_id, epoch, done.writer_epoch)
            if done.last_seq >= batch[-1][0].seq:
                return  # the transaction in doubt did commit
            if done.last_seq != first - 1:
                raise ConflictError(run_id, done.last_seq + 1, first)

    async def write_index(self, writer: RunWriter, info: RunInfo, *, claimed: bool = False) -> None:
        """Commit a new index entry for the run (a claim or a lease change).

        Raises:
            FencedError: another epoch claimed the run first; the writer is retired.
        """
        async with writer.lock:
            if writer.error is not None:
                raise writer.error
            base_epoch = writer.committed.writer_epoch
            wanted = info
            for attempt in range(_FENCE_RETRIES + 1):
                info = dataclasses.replace(
                    writer.committed,
                    writer_epoch=wanted.writer_epoch,
                    lease_owner=wanted.lease_owner,
                    lease_expires_at=wanted.lease_expires_at,
                )
                try:
                    await send_index(writer, info, self._layout)
                    break
                except KafkaError as exc:
                    if await self._settle_index(writer, info, base_epoch, attempt, exc):
                        break
            writer.committed, writer.has_entry = info, True
            if claimed:
                self._fenced.pop(writer.run_id, None)

    async def _settle_index(
        self, writer: RunWriter, info: RunInfo, base_epoch: int, attempt: int, exc: KafkaError
    ) -> bool:
        """After a failed index commit: True if it did commit, False to send it again.

        The failure may be a fence by a newer epoch, a fence by a reader that
        aborted a stalled transaction of ours, or a commit in doubt (Kafka 4
        answers some fenced EndTxn with an error aiokafka does not know). The
        producer is reopened either way, since aiokafka cannot use it again.

        Raises:
            FencedError: a newer epoch owns the run; the writer is retired.
        """
        # Look before reopening: reopening would fence a newer writer back.
        tail, _ = await self._tail(writer.run_id)
        current = tail.info if tail is not None else RunInfo(writer.run_id)
        if _same_claim(current, info) or (
            current.writer_epoch == base_epoch and attempt < _FENCE_RETRIES
        ):
            try:
                await self._reopen(writer)  # settles our transaction in doubt
            except BackendUnavailableError as unavailable:
                await self._retire(writer, unavailable)
                raise
            current = writer.committed
            if _same_claim(current, info):
                return True
            if current.writer_epoch == base_epoch and attempt < _FENCE_RETRIES:
                return False
        if info.writer_epoch > base_epoch:  # a claim that lost the race: claim_writer retries
            fenced = FencedError(
                writer.run_id, info.writer_epoch, max(current.writer_epoch, info.writer_epoch)
            )
        else:
            fenced = self._fence(writer.run_id, base_epoch, current.writer_epoch)
        await self._retire(writer, fenced)
        raise fenced from exc

    # -- closing -------------------------------------------------------------------------

    async def close_writer(self, run_id: str) -> None:
        """Close the run's producer (every append was committed when it returned)."""
        writer = self._writers.pop(run_id, None)
        if writer is not None:
            await stop_quietly(writer.producer, _STOP_S)

    async def close(self) -> None:
        """Close every producer."""
        for run_id in list(self._writers):
            await self.close_writer(run_id)


def _same_claim(now: RunInfo, wanted: RunInfo) -> bool:
    return (now.writer_epoch, now.lease_owner, now.lease_expires_at) == (
        wanted.writer_epoch,
        wanted.lease_owner,
        wanted.lease_expires_at,
    )
