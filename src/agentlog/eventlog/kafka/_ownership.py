"""One owned partition of a partitioned Kafka log: its producer, its runs, its commits.

In the partitioned layout (see :mod:`~agentlog.eventlog.kafka._admin`) the
members of a consumer group own the partitions: the member assigned commands
partition p is the only writer of every run on p. A :class:`PartitionOwner`
is that ownership in one process:

* **One producer per owned partition**, transactional id ``<name>.owner.<p>``,
  never one per run: a worker with 10,000 runs in flight holds as many
  producers as it owns partitions. Opening it calls ``init_transactions``,
  which fences the previous owner's producer (a zombie's next commit fails
  with ProducerFenced, mapped to :class:`~agentlog.errors.NotOwnerError`) and
  aborts its open transaction. Only *then* are the partition's runs-topic
  entries and events read to the last stable offset, so the tails held here
  (last seq, epoch, status, wake-up) stay true until a commit of ours fails:
  nobody else can commit on p without fencing us first. That is why a zombie
  cannot fork a run: its commit either lands before the new owner reads the
  tail, or fails.
* **Group commit**: every write of the partition's runs (appends, claims,
  lease changes, snapshots, prunes, command acks) is a :class:`Change`
  queued here; one task commits whatever is queued in one transaction, so
  concurrent appends of many runs share one commit.
* **Commands exactly once**: a command taken from commands partition p is
  *outstanding* until its effect is committed. The transaction whose events
  include the command's event (its RunStarted, ResumeReceived, RunRetried or
  RunCancelled for that run; each event the effect of one command, the
  oldest outstanding of its run and type) also commits the command offset
  (``send_offsets_to_transaction``), so the effect and the consumption are
  atomic. The committed offset is the lowest outstanding command (Kafka
  keeps one position per partition), so a command is never skipped because a
  later one finished first. ``ack`` of a command whose effect did not happen
  (refused: the run was not waiting, say) commits the offset in the
  partition's next transaction, which starts at once if nothing else is
  queued (a transaction of its own). Either transaction carries the owner's
  reply to the command, applied or refused, on the commands partition, for
  the client that waits on it (:mod:`~agentlog.eventlog.kafka._replies`).

A commit that fails with anything but a fence leaves it in doubt: its callers
get BackendUnavailableError ("may or may not be recorded"), and the next
commit first reopens the producer (settling the transaction) and reads the
partition's tails and committed command offset again, if the group still
assigns the partition here: a command the settled transaction finished is no
longer outstanding (its reply is on record), one it did not still is. A reply
with no event of its own rides in the change that decided it
(``Change.answers``), so a reopening between the two cannot drop it.
Lease fields are kept only for this process's own drivers: the tails read on
opening drop the previous owner's leases, since that owner is fenced.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from agentlog._logging import get_logger
from agentlog.errors import AgentlogError, BackendUnavailableError, FencedError, NotOwnerError
from agentlog.eventlog._base import RunInfo
from agentlog.eventlog.kafka._admin import MAX_RECORD_BYTES, TopicLayout
from agentlog.eventlog.kafka._changes import Change, RecentEvents, RunTail
from agentlog.eventlog.kafka._clients import start_client, stop_quietly, transactional_producer
from agentlog.eventlog.kafka._commands import encode_reply
from agentlog.eventlog.kafka._config import KafkaConfig
from agentlog.eventlog.kafka._errors import kafka_errors
from agentlog.eventlog.kafka._offsets import CommandOffsets
from agentlog.eventlog.kafka._reader import KafkaReader
from agentlog.eventlog.kafka._records import encode_index, index_key

__all__ = ["Change", "PartitionOwner", "RunTail"]

_log = get_logger(__name__)

_STOP_S = 5.0


class PartitionOwner:
    """This process's ownership of one partition (see the module docstring)."""

    def __init__(
        self,
        partition: int,
        config: KafkaConfig,
        layout: TopicLayout,
        common: dict[str, Any],
        reader: KafkaReader,
        admin: AIOKafkaAdminClient,
        still_owned: Callable[[int], bool],
    ) -> None:
        self.partition = partition
        self._admin = admin
        self._config, self._layout, self._common, self._reader = config, layout, common, reader
        self._still_owned = still_owned
        self.producer: AIOKafkaProducer | None = None
        self.tails: dict[str, RunTail] = {}
        #: The runs of ``tails`` a worker's pass looks at (RunTail.may_need_worker):
        #: a pass costs the runs in flight, never the parked or ended ones.
        self.live: set[str] = set()
        #: The events this owner committed last per run, for its own reads.
        self.recent = RecentEvents()
        self.commands = CommandOffsets()
        self.commands_tp = TopicPartition(layout.commands, partition)
        #: Set once ownership is lost: every later write raises it.
        self.error: NotOwnerError | None = None
        self._why = "not owned"
        self._in_doubt = False
        self._queue: list[Change] = []
        self._inflight: list[Change] = []
        #: Transactions committed (a batch of queued writes shares one).
        self.commits = 0
        #: Transactions that first waited ``commit_linger_s`` for more writes.
        self.lingers = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return self.error is None

    # -- opening and closing ----------------------------------------------------------

    async def open(self) -> None:
        """Fence the previous owner, then read the partition's tails and the group's
        committed command offset; start committing."""
        await self._open_producer()
        try:
            await self._load()
        except BaseException:
            await self.close("its runs could not be read")
            raise
        self._task = asyncio.create_task(self._commit_loop(), name=f"kafka-owner-{self.partition}")
        _log.info("kafka_partition_owned", partition=self.partition, runs=len(self.tails))

    async def _open_producer(self) -> None:
        producer = transactional_producer(
            **self._common,
            transactional_id=self._layout.owner_id(self.partition),
            transaction_timeout_ms=int(self._config.transaction_timeout_s * 1000),
            max_request_size=MAX_RECORD_BYTES,
            max_batch_size=1024 * 1024,
        )
        doing = f"partition {self.partition}: cannot start its owner's transactional producer"
        try:
            with kafka_errors(doing):
                async with asyncio.timeout(self._config.request_timeout_s):
                    await start_client(producer)  # init_transactions: fences the previous owner
        except BaseException:
            await stop_quietly(producer, _STOP_S)
            raise
        self.producer = producer

    async def _load(self) -> None:
        entries = await self._reader.exact_many(await self._reader.entries(self.partition))
        self.tails, self.live = {}, set()
        self._hold({e.info.run_id: RunTail.of(e) for e in entries})
        self.recent.forget()
        doing = f"partition {self.partition}: cannot read the group's committed command offset"
        with kafka_errors(doing):
            async with asyncio.timeout(self._config.request_timeout_s):
                offsets = await self._admin.list_consumer_group_offsets(
                    self._config.group_id, partitions=[self.commands_tp]
                )
        committed = offsets.get(self.commands_tp)
        self.commands = CommandOffsets()
        if committed is not None:
            self.commands.seed(int(committed.offset), str(committed.metadata or ""))

    async def close(self, why: str) -> None:
        """Stop writing: later and queued writes raise NotOwnerError; close the producer."""
        if self.error is None:
            self._why = why
            self.error = NotOwnerError("", self.partition, why)
        for change in self._queue:
            change.settle(self._not_owner(change.run_id))
        self._queue.clear()
        task = self._task
        if task is not None and task is not asyncio.current_task():
            # A commit in flight ends by itself (landed, or fenced by the new
            # owner); cutting it short would leave its callers in doubt.
            self._wake.set()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._config.request_timeout_s):
                    await asyncio.shield(task)
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            for change in self._inflight:
                change.settle(
                    BackendUnavailableError(
                        f"partition {self.partition}: its ownership ended while a commit of "
                        f"run {change.run_id!r} was in flight; it may or may not be recorded. "
                        "Read the run again before going on."
                    )
                )
        self.recent.forget()
        if self.producer is not None:
            await stop_quietly(self.producer, _STOP_S)
            self.producer = None
        _log.info("kafka_partition_released", partition=self.partition, why=why)

    def _hold(self, tails: dict[str, RunTail]) -> None:
        """Take ``tails`` as the runs' truth, and keep ``live`` in step."""
        self.tails.update(tails)
        for run_id, tail in tails.items():
            if tail.may_need_worker:
                self.live.add(run_id)
            else:
                self.live.discard(run_id)

    def _not_owner(self, run_id: str) -> NotOwnerError:
        return NotOwnerError(run_id, self.partition, f"this process does not own it ({self._why})")

    # -- writing ---------------------------------------------------------------------

    async def submit(self, change: Change) -> None:
        """Queue ``change`` for the partition's next transaction; return once committed.

        Raises:
            NotOwnerError: the partition is not (or no longer) owned here.
            BackendUnavailableError: the transaction's outcome is in doubt.
            ConflictError, FencedError, LeaseHeldError: refused by the tail.
        """
        if self.error is not None:
            raise self._not_owner(change.run_id)
        self._queue.append(change)
        self._wake.set()
        try:
            await asyncio.shield(change.done)
        except asyncio.CancelledError:
            # The commit goes on without this caller: nobody reads its outcome.
            change.done.add_done_callback(_consume)
            raise

    async def _commit_loop(self) -> None:
        while self.error is None:
            await self._wake.wait()
            self._wake.clear()
            # Only an idle partition's first write lingers for company (KafkaConfig):
            # writes queued during a transaction waited that long, so go next at once.
            linger = self._config.commit_linger_s
            while self._queue and self.error is None:
                if linger:
                    self.lingers += 1
                    await asyncio.sleep(linger)
                    linger = 0.0
                    if not self._queue or self.error is not None:
                        break  # closed meanwhile: close() settled the queue
                batch, self._queue = self._queue, []
                self._inflight = batch
                try:
                    await self._commit(batch)
                except Exception as exc:  # never leave a caller waiting
                    _log.warning(
                        "kafka_partition_commit_failed", partition=self.partition, error=repr(exc)
                    )
                    for change in batch:
                        change.settle(exc)

    async def _commit(self, batch: list[Change]) -> None:
        if self._in_doubt:
            try:
                await self._reopen()
            except NotOwnerError:
                for change in batch:
                    change.settle(self._not_owner(change.run_id))
                return
        work: dict[str, RunTail] = {}
        before: dict[str, RunTail] = {}
        taken: list[Change] = []
        for change in batch:
            if change.run_id:
                run_id = change.run_id
                base = work.get(run_id) or self.tails.get(run_id) or RunTail(RunInfo(run_id))
                before.setdefault(run_id, base)
                try:
                    work[run_id] = change.stage(base)
                except AgentlogError as exc:
                    change.settle(exc)
                    continue
            taken.append(change)
        if not taken:
            return
        replies = self.commands.matched(taken)
        answers = {o: r for c in taken for o, r in c.answers.items() if r is not None}
        done = set(replies)
        position = self.commands.position(done)
        try:
            final = await self._transact(taken, work, before, position, replies, answers)
        except FencedError:
            await self.close("a newer owner opened its producer (it fenced this one)")
            for change in taken:
                change.settle(self._not_owner(change.run_id))
            return
        except BaseException as exc:
            self._in_doubt = True
            error = BackendUnavailableError(
                f"partition {self.partition}: a commit of {len(taken)} writes failed ({exc!r}); "
                "it may or may not be recorded. Read the run again before going on."
            )
            error.__cause__ = exc
            for change in taken:
                change.settle(error)
            if not isinstance(exc, Exception):
                raise
            return
        self._hold(final)
        self.commits += 1
        for change in taken:
            if change.events:
                self.recent.committed(change.run_id, change.events, final[change.run_id])
            elif change.run_id in final and final[change.run_id].pruned:
                self.recent.forget(change.run_id)
        self.commands.commit(position, done)
        for run_id, tail in final.items():
            if tail.offset >= 0 and tail.info.last_seq:
                # A parked run keeps one point: a snapshot at its last event needs no read.
                keep = None if tail.may_need_worker else 1
                self._reader.note_point(run_id, tail.info.last_seq, tail.offset, keep=keep)
        for change in taken:
            change.settle()

    async def _transact(
        self,
        taken: list[Change],
        work: dict[str, RunTail],
        before: dict[str, RunTail],
        position: int | None,
        replies: dict[int, bool],
        answers: dict[int, bytes],
    ) -> dict[str, RunTail]:
        """One transaction: events, then index entries, extra records, the replies to
        the commands it finishes (``answers``, where not plain) and the command offset."""
        producer = self.producer
        assert producer is not None
        layout, p = self._layout, self.partition
        done = set(replies)
        sent: list[asyncio.Future[Any]] = []
        doing = f"partition {p}: cannot commit {len(taken)} writes"
        try:
            with kafka_errors(doing, fenced=lambda: NotOwnerError("", p, "fenced")):
                async with asyncio.timeout(self._config.request_timeout_s):
                    await producer.begin_transaction()
                    spans = await self._send_events(producer, taken, sent)
                    final = dict(work)
                    indexed = {c.run_id for c in taken if c.index}  # once, not per run
                    for run_id, tail in work.items():
                        tail = await self._placed(tail, before[run_id], spans.get(run_id, []))
                        due = self._index_due(tail, before[run_id], spans.get(run_id))
                        if run_id in indexed or due:
                            value = encode_index(tail.entry(p))
                            sent.append(
                                await producer.send(
                                    layout.runs, value, key=index_key(run_id), partition=p
                                )
                            )
                            tail = dataclasses.replace(tail, has_entry=True, since_index=0)
                        final[run_id] = tail
                    for change in taken:
                        for key, extra in change.records:
                            sent.append(
                                await producer.send(layout.runs, extra, key=key, partition=p)
                            )
                    for offset, applied in sorted(replies.items()):
                        run_id = self.commands.outstanding[offset][0]
                        sent.append(
                            await producer.send(
                                layout.commands,
                                answers.get(offset) or encode_reply(offset, applied),
                                key=run_id.encode(),
                                partition=p,
                            )
                        )
                    if position is not None and self.commands.due(position, done):
                        meta = self.commands.metadata(position, done)
                        await producer.send_offsets_to_transaction(
                            {self.commands_tp: (position, meta)}, self._config.group_id
                        )
                    await producer.commit_transaction()
        except BaseException:
            for future in sent:
                future.add_done_callback(_consume)
            raise
        return final

    async def _send_events(
        self, producer: AIOKafkaProducer, taken: list[Change], sent: list[asyncio.Future[Any]]
    ) -> dict[str, list[_Span]]:
        """Send every change's events in as few record batches as fit; each run's spans.

        aiokafka sends one batch per partition per request and waits for a
        batch to be delivered before it queues the next for the same
        partition, so a batch per change would cost the transaction one
        round trip per change. One shared batch (up to ``max_batch_size``)
        carries the events of every run of the transaction in one request;
        a record's offset is the batch's base offset plus its index in it.
        """
        spans: dict[str, list[_Span]] = {}
        pending: list[tuple[str, int, int]] = []  # (run id, first index, records) in the batch

        async def send(batch: Any) -> None:
            future = await producer.send_batch(batch, self._layout.events, partition=self.partition)
            sent.append(future)
            for run_id, first, records in pending:
                spans.setdefault(run_id, []).append(_Span(future, first, records))
            pending.clear()

        builder, count = producer.create_batch(), 0
        for change in taken:
            if not change.events:
                continue
            key, first = change.run_id.encode(), count
            for _event, value in change.events:
                if builder.append(key=key, value=value, timestamp=None) is None:
                    if count > first:
                        pending.append((change.run_id, first, count - first))
                    await send(builder)
                    builder, count, first = producer.create_batch(), 0, 0
                    builder.append(key=key, value=value, timestamp=None)  # one always fits
                count += 1
            pending.append((change.run_id, first, count - first))
        if pending:
            await send(builder)
        return spans

    @staticmethod
    async def _placed(tail: RunTail, before: RunTail, spans: list[_Span]) -> RunTail:
        """The tail with its events offsets, once the batches are on the broker."""
        if not spans:
            return tail
        bases = [await span.future for span in spans]
        first = (
            before.first_offset if before.first_offset >= 0 else bases[0].offset + spans[0].first
        )
        last_after = bases[-1].offset + spans[-1].first + spans[-1].count
        added = sum(span.count for span in spans)
        return dataclasses.replace(
            tail, first_offset=first, offset=last_after, since_index=before.since_index + added
        )

    def _index_due(self, tail: RunTail, before: RunTail, spans: list[_Span] | None) -> bool:
        if not spans:
            return False
        return (
            not before.has_entry
            or before.first_offset < 0  # the entry must say where the events start
            or tail.info.status != before.info.status
            or tail.since_index >= self._config.index_every
        )

    async def _reopen(self) -> None:
        """Settle an in-doubt transaction and read the tails again, if still the owner."""
        if not self._still_owned(self.partition):
            await self.close("the group no longer assigns it here")
            raise self._not_owner("")
        if self.producer is not None:
            await stop_quietly(self.producer, _STOP_S)
            self.producer = None
        await self._open_producer()
        before = self.commands
        await self._load()
        self.commands.reopened(before)
        self._in_doubt = False


@dataclasses.dataclass(frozen=True, slots=True)
class _Span:
    """Consecutive records of one run in one sent record batch."""

    future: asyncio.Future[Any]
    """The batch's delivery: its metadata's offset is the batch's base offset."""
    first: int
    """The index of the run's first record here within the batch."""
    count: int


def _consume(future: asyncio.Future[Any]) -> None:
    # A send future of a failed transaction holds the same error; read it.
    if not future.cancelled():
        future.exception()
