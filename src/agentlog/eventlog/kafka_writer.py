"""Fenced, transactional writers of :class:`~agentlog.eventlog.kafka.KafkaEventLog`.

One :class:`RunWriter` per run this process writes, each with its own
transactional producer (transactional id ``<name>.writer.<run_id>``). Opening
one calls ``init_transactions``, which fences every other producer of the
run, and only then reads the run's tail, so the tail it keeps is the truth
until one of its own commits fails with ProducerFenced (see the module
docstring of :mod:`agentlog.eventlog.kafka` for why that rules out forks).

``durable=True`` appends commit before they return. ``durable=False``
appends are queued and committed in the background in order, many events per
transaction; an error there (a fence, say) is raised by the run's next call.
A broker that goes away mid-commit is retried until ``request_timeout_s``:
the writer reopens (fencing its own old producer, which completes or aborts
the transaction in doubt), re-reads the tail, and resends only what is not
there, so nothing committed is lost or duplicated.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

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
from agentlog.eventlog.kafka_admin import MAX_RECORD_BYTES, TopicLayout
from agentlog.eventlog.kafka_reader import KafkaReader
from agentlog.eventlog.kafka_records import IndexEntry, encode_index, index_key

if TYPE_CHECKING:
    from agentlog.eventlog.kafka import KafkaConfig

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
    since_index: int = 0
    #: Accepted but not yet committed: each event with its encoded record value.
    pending: list[tuple[Event, bytes]] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    task: asyncio.Task[None] | None = None
    error: AgentlogError | None = None
    #: The run as of every accepted append, committed or queued.
    head: RunInfo = field(init=False)

    def __post_init__(self) -> None:
        self.head = self.committed

    def reset_head(self) -> None:
        """Recompute ``head`` from the committed tail and the queue."""
        events = [event for event, _ in self.pending]
        self.head = self.committed.after(events) if events else self.committed


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
            with contextlib.suppress(KafkaError, OSError, RuntimeError):
                await producer.stop()
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
            with contextlib.suppress(KafkaError, OSError, RuntimeError):
                await producer.stop()
            raise
        if entry is None:
            return RunWriter(run_id, producer, partition, -1, -1, RunInfo(run_id), False)
        return RunWriter(
            run_id, producer, partition, entry.first_offset, entry.offset, entry.info, True
        )

    async def _reopen(self, writer: RunWriter) -> None:
        with contextlib.suppress(KafkaError, OSError, RuntimeError):
            await writer.producer.stop()
        fresh = await self._open(writer.run_id)
        writer.producer, writer.partition = fresh.producer, fresh.partition
        writer.first_offset, writer.offset = fresh.first_offset, fresh.offset
        writer.committed, writer.has_entry = fresh.committed, fresh.has_entry
        writer.since_index = 0
        writer.reset_head()

    async def get(self, run_id: str) -> RunWriter:
        """This process's writer of the run, opened (and fencing) if needed."""
        writer = self._writers.get(run_id)
        if writer is None or writer.error is not None:
            if writer is not None:  # its producer may sit mid-transaction: retire it
                with contextlib.suppress(KafkaError, OSError, RuntimeError):
                    await writer.producer.stop()
            writer = await self._open(run_id)
            self._writers[run_id] = writer
        return writer

    async def fresh(self, run_id: str) -> RunWriter:
        """A writer that fenced every other one just now, with the true tail."""
        writer = self._writers.get(run_id)
        if writer is None or writer.error is not None:
            return await self.get(run_id)
        await self._flush(writer)
        async with writer.lock:
            await self._reopen(writer)
        return writer

    async def current(self, run_id: str, epoch: int) -> RunWriter:
        """The writer of ``epoch``; FencedError if a newer epoch owns the run."""
        self._check_fenced(run_id, epoch)
        writer = await self.get(run_id)
        if not writer.has_entry:
            raise UnknownRunError(run_id, f"topic {self._layout.runs}")
        check_next(run_id, 0, 1, epoch, writer.head.writer_epoch)
        return writer

    def _check_fenced(self, run_id: str, epoch: int) -> None:
        fenced = self._fenced.get(run_id)
        if fenced is not None and epoch <= fenced[0]:
            raise FencedError(run_id, epoch, fenced[1])

    # -- appending ---------------------------------------------------------------------

    async def append(
        self,
        run_id: str,
        events: list[Event],
        raw: list[bytes],
        first_seq: int,
        epoch: int,
        *,
        durable: bool,
    ) -> None:
        """Check the batch against the tail, queue it, and commit if durable."""
        self._check_fenced(run_id, epoch)
        writer = await self.get(run_id)
        if writer.error is not None:
            raise writer.error
        head = writer.head
        if first_seq > head.last_seq + 1 or epoch > head.writer_epoch:
            # Our tail may be stale only if another process wrote: re-read it.
            writer = await self.fresh(run_id)
            head = writer.head
        check_next(run_id, head.last_seq, first_seq, epoch, head.writer_epoch)
        writer.pending.extend(zip(events, raw, strict=True))
        writer.head = head.after(events)
        if durable or len(writer.pending) >= self._config.max_pending:
            await self._flush(writer)
        elif writer.task is None:
            writer.task = asyncio.create_task(self._background(writer))

    async def _background(self, writer: RunWriter) -> None:
        try:
            # Let the run queue more steps first: fewer, larger transactions.
            await asyncio.sleep(self._config.async_linger_s)
            await self._flush(writer)
        except AgentlogError as exc:
            log.warning("kafka_async_commit_failed", run_id=writer.run_id, error=str(exc))
        finally:
            writer.task = None
        if writer.pending and writer.error is None:
            writer.task = asyncio.create_task(self._background(writer))

    async def flush(self, run_id: str) -> None:
        """Commit the run's queued events, if this process has any."""
        writer = self._writers.get(run_id)
        if writer is not None and writer.pending:
            await self._flush(writer)

    async def flush_all(self) -> None:
        """Commit every queued event of this process."""
        for writer in list(self._writers.values()):
            if writer.pending:
                await self._flush(writer)

    async def _flush(self, writer: RunWriter) -> None:
        async with writer.lock:
            if writer.error is not None:
                raise writer.error
            if not writer.pending:
                return
            batch = list(writer.pending)
            try:
                await self._commit(writer, batch)
            except AgentlogError as exc:
                writer.error = exc
                writer.pending.clear()
                writer.reset_head()
                if self._writers.get(writer.run_id) is writer:
                    del self._writers[writer.run_id]
                with contextlib.suppress(KafkaError, OSError, RuntimeError):
                    await writer.producer.stop()
                raise
            del writer.pending[: len(batch)]

    async def _commit(self, writer: RunWriter, batch: list[tuple[Event, bytes]]) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._config.request_timeout_s
        run_id, first, epoch = writer.run_id, batch[0][0].seq, batch[0][0].writer_epoch
        fences = in_doubt = 0
        while True:
            try:
                await self._transact(writer, batch)
                return
            except _FENCED as exc:
                fences += 1
                entry, _ = await self._tail(run_id)
                current = entry.info if entry is not None else RunInfo(run_id)
                if current.writer_epoch > epoch or fences > _FENCE_RETRIES:
                    self._fenced[run_id] = (epoch, max(current.writer_epoch, epoch))
                    raise FencedError(run_id, epoch, current.writer_epoch) from exc
                if current.last_seq >= first:
                    raise ConflictError(run_id, current.last_seq + 1, first) from exc
                # Fenced by a writer of the same epoch that wrote nothing: take it back.
            except KafkaError as exc:
                in_doubt += 0 if exc.retriable else 1
                if isinstance(exc, _REFUSED) or in_doubt > _FENCE_RETRIES:
                    raise EventLogError(
                        f"run {run_id!r}: Kafka refused the append at seq {first}: {exc}"
                    ) from exc
                if loop.time() > deadline:
                    raise BackendUnavailableError(
                        f"run {run_id!r}: append at seq {first} not confirmed within "
                        f"{self._config.request_timeout_s:g}s ({exc}); retry once the broker "
                        "answers"
                    ) from exc
                log.warning("kafka_append_retry", run_id=run_id, seq=first, error=str(exc))
                await asyncio.sleep(0.5)
            try:
                await self._reopen(writer)
            except BackendUnavailableError:
                if loop.time() > deadline:
                    raise
                continue
            done = writer.committed
            if done.writer_epoch > epoch:
                self._fenced[run_id] = (epoch, done.writer_epoch)
                raise FencedError(run_id, epoch, done.writer_epoch)
            if done.last_seq >= batch[-1][0].seq:
                return  # the transaction in doubt did commit
            if done.last_seq != first - 1:
                raise ConflictError(run_id, done.last_seq + 1, first)

    async def _transact(self, writer: RunWriter, batch: list[tuple[Event, bytes]]) -> None:
        producer, key = writer.producer, writer.run_id.encode()
        info = writer.committed.after([event for event, _ in batch])
        with_index = (
            not writer.has_entry
            or writer.first_offset < 0  # the entry must say where the events start
            or info.status != writer.committed.status
            or writer.since_index + len(batch) >= self._config.index_every
        )
        # (base-offset future, records in that record batch); one record batch's
        # offsets are consecutive, which gives every event's offset.
        sent: list[tuple[asyncio.Future[Any], int]] = []
        try:
            await producer.begin_transaction()
            builder, count = producer.create_batch(), 0
            for _event, value in batch:
                if builder.append(key=key, value=value, timestamp=None) is None:
                    sent.append((await self._send_batch(writer, builder), count))
                    # The first record of a batch always fits, however large.
                    builder, count = producer.create_batch(), 0
                    builder.append(key=key, value=value, timestamp=None)
                count += 1
            sent.append((await self._send_batch(writer, builder), count))
            first_offset = writer.first_offset
            if with_index:
                metas = await asyncio.gather(*(future for future, _ in sent))
                first_offset = first_offset if first_offset >= 0 else metas[0].offset
                last = metas[-1].offset + sent[-1][1] - 1
                entry = IndexEntry(info, writer.partition, first_offset, last + 1)
                await producer.send(
                    self._layout.runs,
                    encode_index(entry),
                    key=index_key(writer.run_id),
                    partition=0,
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
        self._reader.note_point(writer.run_id, info.last_seq, writer.offset)

    async def _send_batch(self, writer: RunWriter, builder: Any) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = await writer.producer.send_batch(
            builder, self._layout.events, partition=writer.partition
        )
        return future

    async def write_index(self, writer: RunWriter, info: RunInfo, *, claimed: bool = False) -> None:
        """Commit a new index entry for the run (a claim or a lease change)."""
        async with writer.lock:
            if writer.pending:
                batch = list(writer.pending)
                await self._commit(writer, batch)
                del writer.pending[: len(batch)]
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
                    await self._send_index(writer, info)
                    break
                except _FENCED as exc:
                    tail, _ = await self._tail(writer.run_id)
                    current = tail.info.writer_epoch if tail is not None else 0
                    await self._drop(writer)
                    raise FencedError(
                        writer.run_id, info.writer_epoch, max(current, info.writer_epoch)
                    ) from exc
                except KafkaError as exc:
                    # In doubt (Kafka 4 answers some fenced EndTxn with an error
                    # aiokafka does not know): reopen, which settles the old
                    # transaction, and look at what the index says now.
                    try:
                        await self._reopen(writer)
                    except BackendUnavailableError:
                        await self._drop(writer)
                        raise
                    now = writer.committed
                    if (now.writer_epoch, now.lease_owner, now.lease_expires_at) == (
                        info.writer_epoch,
                        info.lease_owner,
                        info.lease_expires_at,
                    ):
                        break  # it did commit
                    if now.writer_epoch != base_epoch or attempt == _FENCE_RETRIES:
                        await self._drop(writer)
                        raise FencedError(
                            writer.run_id, info.writer_epoch, max(now.writer_epoch, base_epoch)
                        ) from exc
            writer.committed, writer.has_entry = info, True
            writer.reset_head()
            if claimed:
                self._fenced.pop(writer.run_id, None)

    async def _send_index(self, writer: RunWriter, info: RunInfo) -> None:
        entry = IndexEntry(info, writer.partition, writer.first_offset, writer.offset)
        producer = writer.producer
        await producer.begin_transaction()
        future = await producer.send(
            self._layout.runs,
            encode_index(entry),
            key=index_key(writer.run_id),
            partition=0,
        )
        try:
            await producer.commit_transaction()
        except BaseException as exc:
            future.add_done_callback(_consume)
            _interrupted(writer, exc)
            raise

    async def _drop(self, writer: RunWriter) -> None:
        if self._writers.get(writer.run_id) is writer:
            del self._writers[writer.run_id]
        with contextlib.suppress(KafkaError, OSError, RuntimeError):
            await writer.producer.stop()

    # -- closing -------------------------------------------------------------------------

    async def close_writer(self, run_id: str) -> None:
        """Commit the run's queue and close its producer."""
        writer = self._writers.pop(run_id, None)
        if writer is None:
            return
        try:
            if writer.pending and writer.error is None:
                await self._flush(writer)
        finally:
            with contextlib.suppress(KafkaError, OSError, RuntimeError):
                await writer.producer.stop()

    async def close(self) -> None:
        """Commit every queue and close every producer."""
        errors: list[AgentlogError] = []
        for run_id in list(self._writers):
            try:
                await self.close_writer(run_id)
            except AgentlogError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]


def _interrupted(writer: RunWriter, exc: BaseException) -> None:
    """Retire a writer whose transaction stopped half way for a non-Kafka reason.

    A cancelled task (or any error outside aiokafka) can leave the producer
    in the middle of a transaction; the next use opens a fresh producer,
    whose init_transactions settles the one in doubt, and reads the true tail.
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
