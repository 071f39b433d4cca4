"""Membership of a consumer group: which partitions of runs this process owns.

The group is Kafka's own (aiokafka's group coordinator): the members
subscribe to ``<name>.commands`` with one ``group_id``, and the partitions
the group assigns a member are the partitions of runs it owns (see
:mod:`~agentlog.eventlog.kafka._ownership`). A background task polls the
consumer: that keeps the member in the group (aiokafka drops a member that
does not poll for ``max.poll.interval.ms``), runs the rebalances, and buffers
the commands of owned partitions for :meth:`GroupMember.take`.

Rebalances. aiokafka's protocol is eager: every rebalance revokes every
partition of every member, then assigns them anew. Stopping every run on
each rebalance would stall the fleet whenever a worker joins, so a revoke
changes nothing here, and writing goes on until the new assignment:

* a partition in the new assignment that was ours in the generation just
  before (generation ``g + 1`` after ``g``) is kept as it is: nobody else
  owned it in between;
* any other assigned partition is opened (fencing whoever had it);
* an owned partition not in the new assignment is closed: its later writes
  raise NotOwnerError.

Writes in the window are safe: a new owner opens the partition's
transactional id before it reads, so our commit either lands before its read
(it sees it) or fails with ProducerFenced (we lose the partition at once). A
member paused past its session (a zombie) rejoins at a later generation, so
it opens its partitions afresh; its writes before that fail the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from agentlog._logging import get_logger
from agentlog.crypto import PayloadCipher
from agentlog.errors import AgentlogError, CorruptEventError, EncryptionError
from agentlog.eventlog._base import Command
from agentlog.eventlog.kafka._admin import TopicLayout
from agentlog.eventlog.kafka._clients import start_client, stop_quietly
from agentlog.eventlog.kafka._commands import command_ref, decode_command, decode_reply
from agentlog.eventlog.kafka._config import KafkaConfig
from agentlog.eventlog.kafka._errors import kafka_errors
from agentlog.eventlog.kafka._ownership import Change, PartitionOwner
from agentlog.eventlog.kafka._queue_grants import QueueAdmitter, decode_ask
from agentlog.eventlog.kafka._reader import KafkaReader

__all__ = ["GroupMember"]

_log = get_logger(__name__)

_STOP_S = 5.0
_POLL_MS = 100
_RETRY_OPEN_S = 1.0
#: Commands of one partition a member holds decoded, not yet handed out; the rest
#: wait on the broker (its fetching of the partition is paused), so a backlog
#: (clients that submit faster than the worker starts runs) costs no memory here,
#: and no work per commit (every held command is outstanding). Read again once
#: half are taken.
BUFFER_PER_PARTITION = 500


class GroupMember:
    """This process as a member of ``config.group_id`` (see the module docstring)."""

    def __init__(
        self,
        config: KafkaConfig,
        layout: TopicLayout,
        common: dict[str, Any],
        reader: KafkaReader,
        admin: AIOKafkaAdminClient,
    ) -> None:
        self._config, self._layout, self._common, self._reader = config, layout, common, reader
        self._admin = admin
        session_ms = int(config.session_timeout_s * 1000)
        self.consumer = AIOKafkaConsumer(
            **common,
            group_id=config.group_id,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=session_ms,
            heartbeat_interval_ms=max(100, session_ms // 3),
            rebalance_timeout_ms=max(session_ms, 30_000),
        )
        self.owners: dict[int, PartitionOwner] = {}
        #: Opens sealed command content (set by the log before it starts).
        self.cipher: PayloadCipher | None = None
        self._assigned: set[int] = set()
        self._generation = -2
        self._buffer: deque[Command] = deque()
        #: Commands of ``_buffer`` per partition (see BUFFER_PER_PARTITION).
        self._buffered: dict[int, int] = {}
        #: Per owned partition, the admitter of the queues that hash to it.
        self._admitters: dict[int, QueueAdmitter] = {}
        self._task: asyncio.Task[None] | None = None
        self._last_error: str = ""
        self._changed = asyncio.Event()
        self._opening = asyncio.Lock()
        self._stopped = False

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Connect and subscribe; the group assigns partitions in the background."""
        await start_client(self.consumer)
        self.consumer.subscribe([self._layout.commands], listener=_Listener(self))
        self._task = asyncio.create_task(self._poll_loop(), name="kafka-group-poll")

    async def stop(self) -> None:
        """Close every owned partition and leave the group (its partitions move at once)."""
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        # An open in flight (the rebalance listener runs in the consumer's own
        # task) finishes first and is closed here; none starts after this.
        async with self._opening:
            for admitter in self._admitters.values():
                await admitter.stop()
            for owner in list(self.owners.values()):
                await owner.close("the log was closed")
            self.owners.clear()
        await stop_quietly(self.consumer, _STOP_S)

    # -- ownership ---------------------------------------------------------------------

    def owner(self, partition: int) -> PartitionOwner | None:
        """The live owner of ``partition`` here, or None."""
        owner = self.owners.get(partition)
        return owner if owner is not None and owner.alive else None

    def owned(self) -> list[int]:
        """The partitions this process owns now."""
        return sorted(p for p, owner in self.owners.items() if owner.alive)

    def still_assigned(self, partition: int) -> bool:
        return partition in {tp.partition for tp in self.consumer.assignment()}

    async def wait_changed(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) for the next change of ownership."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._changed.wait()
        self._changed.clear()

    async def assigned(self, partitions: list[int], generation: int) -> None:
        """The group's new assignment (see the module docstring for the rule)."""
        continuous = generation == self._generation + 1
        self._generation, self._assigned = generation, set(partitions)
        for p in list(self.owners):
            owner = self.owners[p]
            if p not in self._assigned or not continuous or not owner.alive:
                del self.owners[p]
                await owner.close(
                    "the group assigned it elsewhere" if p not in self._assigned else "reopened"
                )
        # Commands of partitions kept are in the buffer already; the consumer
        # fetches them again from the committed offset: skip those (see _poll).
        await self._open_missing()
        self._changed.set()
        _log.info("kafka_group_assigned", partitions=self.owned(), generation=generation)

    async def _open_missing(self) -> None:
        # One opener at a time (the listener and the poll loop both open):
        # two producers opened for one partition would fence each other.
        async with self._opening:
            if self._stopped:
                return
            missing = [p for p in sorted(self._assigned) if p not in self.owners]
            results = await asyncio.gather(
                *(self._open(p) for p in missing), return_exceptions=True
            )
        for p, result in zip(missing, results, strict=True):
            if isinstance(result, BaseException):
                self._last_error = f"partition {p}: {result}"
                _log.warning("kafka_partition_open_failed", partition=p, error=str(result))

    async def _open(self, partition: int) -> None:
        owner = PartitionOwner(
            partition,
            self._config,
            self._layout,
            self._common,
            self._reader,
            self._admin,
            self.still_assigned,
        )
        await owner.open()
        if partition in self._assigned and partition not in self.owners:
            self.owners[partition] = owner
        else:  # revoked while it opened
            await owner.close("revoked while it opened")

    # -- commands ----------------------------------------------------------------------

    def take(self, limit: int) -> list[Command]:
        """Up to ``limit`` buffered commands of partitions owned now, oldest first."""
        out: list[Command] = []
        while self._buffer and len(out) < limit:
            command = self._buffer.popleft()
            partition = command_ref(command)[0]
            self._buffered[partition] -= 1
            if self.owner(partition) is not None:
                out.append(command)
        drained = [
            tp
            for tp in self.consumer.paused()
            if self._buffered.get(tp.partition, 0) <= BUFFER_PER_PARTITION // 2
        ]
        if drained:
            self.consumer.resume(*drained)
        return out

    async def ack(self, command: Command) -> None:
        """The command is done with (see :mod:`~agentlog.eventlog.kafka._ownership`)."""
        partition, offset = command_ref(command)
        owner = self.owner(partition)
        if owner is None:
            return  # the partition's next owner takes the command again: nothing lost
        if offset not in owner.commands.outstanding:
            return  # the transaction of its effect committed it already
        await owner.submit(Change("", answers={offset: None}))

    async def _poll_loop(self) -> None:
        while True:
            try:
                with kafka_errors("cannot poll the commands topic"):
                    batches = await self.consumer.getmany(timeout_ms=_POLL_MS)
                self._last_error = ""
            except AgentlogError as exc:
                if str(exc) != self._last_error:
                    _log.warning("kafka_group_poll_failed", error=str(exc))
                self._last_error = str(exc)
                await asyncio.sleep(_RETRY_OPEN_S)
                continue
            try:
                again = [self._buffer_records(tp, records) for tp, records in batches.items()]
                if any(again):
                    await asyncio.sleep(_POLL_MS / 1000)
                if self._assigned - set(self.owners):
                    await self._open_missing()
                    if self._assigned - set(self.owners):
                        await asyncio.sleep(_RETRY_OPEN_S)
            except Exception as exc:  # the loop keeps this member in the group: never die
                _log.error("kafka_group_poll_error", error=repr(exc))
                await asyncio.sleep(_RETRY_OPEN_S)

    def _buffer_records(self, tp: TopicPartition, records: list[Any]) -> bool:
        """Buffer the commands of an owned partition; True: fetch them again later."""
        owner = self.owner(tp.partition)
        if owner is None:
            if records and self.still_assigned(tp.partition):
                # Fetched while the partition's owner is still opening (aiokafka
                # fetches during the assignment callback): read them again later.
                self.consumer.seek(tp, records[0].offset)
                return True
            return False  # not ours (any more): its owner reads it from the committed offset
        for record in records:
            if self._buffered.get(tp.partition, 0) >= BUFFER_PER_PARTITION:
                # Held enough: the rest stays on the broker until half are taken.
                self.consumer.seek(tp, record.offset)
                self.consumer.pause(tp)
                return False
            taken = owner.commands
            if taken.skip(record.offset):
                continue  # handed out or done already (fetched again after a rebalance)
            if decode_reply(record.value) is not None:
                taken.taken(record.offset)  # an owner's answer to a command, for its client
                continue
            ask = decode_ask(record.value)
            if ask is not None:  # for the admitter of a queue of this partition
                taken.taken(record.offset, ask[1].run_id)
                self._admitter(owner).asked(record.offset, *ask)
                continue
            where = f"topic {tp.topic} partition {tp.partition} offset {record.offset}"
            try:
                command = decode_command(
                    record.value or b"", (tp.partition, record.offset), where, self.cipher
                )
            except (CorruptEventError, EncryptionError) as exc:
                # Never applied, never blocking the partition: skipped, loudly.
                _log.error("kafka_command_unreadable", where=where, error=str(exc))
                taken.taken(record.offset)
                continue
            taken.taken(record.offset, command.run_id, command.data.type)
            self._buffer.append(command)
            self._buffered[tp.partition] = self._buffered.get(tp.partition, 0) + 1
        return False

    def _admitter(self, owner: PartitionOwner) -> QueueAdmitter:
        admitter = self._admitters.get(owner.partition)
        if admitter is None or admitter.owner is not owner:  # one per ownership
            admitter = self._admitters[owner.partition] = QueueAdmitter(owner, self._reader)
        return admitter


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, member: GroupMember) -> None:
        self._member = member

    async def on_partitions_revoked(self, revoked: Any) -> None:
        # Eager protocol: everything is revoked on every rebalance; see the
        # module docstring for why writing goes on until the new assignment.
        del revoked

    async def on_partitions_assigned(self, assigned: Any) -> None:
        coordinator = getattr(self._member.consumer, "_coordinator", None)
        # aiokafka 0.14 keeps the generation on its coordinator (private); a
        # generation we cannot read is never taken as continuous.
        generation = getattr(coordinator, "generation", None)
        if not isinstance(generation, int):
            generation = -10
        await self._member.assigned(sorted(tp.partition for tp in assigned), generation)
