"""PartitionedKafkaEventLog: the Kafka log whose runs a consumer group's members own.

Opened by :meth:`KafkaEventLog.connect <agentlog.eventlog.kafka._log.KafkaEventLog.connect>`
when the topics have the partitioned layout (``KafkaConfig.layout``). It
reads like the standalone log, but only the runs-topic partitions of the runs
it touches. It writes only runs of partitions it owns:

* with ``KafkaConfig.group_id`` it is a member of the group (see
  :mod:`~agentlog.eventlog.kafka._group`); claims, appends, leases, snapshots
  and prunes of an owned run go through its partition's owner (one
  transactional producer per owned partition, group commit; see
  :mod:`~agentlog.eventlog.kafka._ownership`); :meth:`runnable`,
  :meth:`next_wake` and :meth:`take_commands` see the owned partitions only;
* without, it is a client: every write raises NotOwnerError, and
  :meth:`send_command` asks the owner instead; :meth:`command_outcome`
  waits for the owner's reply (:mod:`~agentlog.eventlog.kafka._replies`), and
  the client's reads of a run it submitted wait for the start's reply
  (read-your-writes).

``direct_writes`` is False either way: a run's only writer is its
partition's owner.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from agentlog.errors import (
    BackendUnavailableError,
    CorruptEventError,
    NotOwnerError,
    UnknownRunError,
)
from agentlog.eventlog._base import (
    Capabilities,
    Command,
    RunInfo,
    Snapshot,
    check_batch,
    check_next,
    check_run_id,
    claimed,
    lease_expiry,
    leased,
    select_runs,
)
from agentlog.eventlog._queue_slots import SlotAsk, SlotGrant
from agentlog.eventlog._run_pages import RunQuery, RunsPage, page_in_memory
from agentlog.eventlog.codec import decode_event, encode_event
from agentlog.eventlog.events import Event, RunStatus, utcnow
from agentlog.eventlog.kafka._commands import command_ref, encode_command
from agentlog.eventlog.kafka._config import KafkaConfig
from agentlog.eventlog.kafka._errors import kafka_errors
from agentlog.eventlog.kafka._group import GroupMember
from agentlog.eventlog.kafka._log import KafkaEventLog
from agentlog.eventlog.kafka._ownership import Change, PartitionOwner, RunTail
from agentlog.eventlog.kafka._queue_grants import RELEASE, decode_grant, encode_ask
from agentlog.eventlog.kafka._reader import KafkaReader
from agentlog.eventlog.kafka._records import IndexEntry, snapshot_key
from agentlog.eventlog.kafka._replies import ReplyWatch
from agentlog.eventlog.kafka._writer_pool import WriterPool

__all__ = ["PartitionedKafkaEventLog"]


class PartitionedKafkaEventLog(KafkaEventLog, layout="partitioned"):
    """A Kafka log in the partitioned layout, owned by a consumer group (module docstring)."""

    capabilities = Capabilities(direct_writes=False, commands=True, claims_seen=False)

    def __init__(
        self,
        config: KafkaConfig,
        admin: AIOKafkaAdminClient,
        reader: KafkaReader,
        pool: WriterPool,
        plain: AIOKafkaProducer,
        partitions: int,
        member: GroupMember | None,
        common: dict[str, Any],
    ) -> None:
        super().__init__(config, admin, reader, pool, plain, partitions)
        self.member = member
        self.layout = reader.layout
        self._common = common
        self._replies: ReplyWatch | None = None
        #: Starts this log sent whose outcome it has not seen: reads of the run wait for it.
        self._unsettled: dict[str, list[Command]] = {}

    # -- ownership -----------------------------------------------------------------------

    @property
    def owned_partitions(self) -> list[int]:
        """The partitions this process owns now (none for a client)."""
        return self.member.owned() if self.member else []

    @property
    def transactional_producers(self) -> int:
        """Transactional producers held: one per owned partition, never one per run."""
        if self.member is None:
            return 0
        return sum(1 for o in self.member.owners.values() if o.producer is not None)

    async def wait_for_ownership_change(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until the group's assignment changes here."""
        if self.member is not None:
            await self.member.wait_changed(timeout_s)

    def _owner(self, run_id: str) -> PartitionOwner:
        check_run_id(run_id)
        partition = self.layout.partition_of(run_id)
        owner = self.member.owner(partition) if self.member else None
        if owner is None:
            why = (
                "this process is not a member of the worker group; send a command"
                if self.member is None
                else "its partition is not assigned to this worker"
            )
            raise NotOwnerError(run_id, partition, why)
        return owner

    def _live_tails(self) -> list[RunTail]:
        """The owned runs a pass looks at: in flight or on a timer, never the
        parked or ended ones (``PartitionOwner.live``)."""
        if self.member is None:
            return []
        owners = [self.member.owners[p] for p in self.member.owned()]
        return [owner.tails[run_id] for owner in owners for run_id in owner.live]

    # -- events ------------------------------------------------------------------------

    async def append(self, events: Sequence[Event], *, durable: bool = True) -> None:
        """Commit the batch in its partition's next transaction, before returning."""
        del durable
        run_id, first_seq, epoch = check_batch(events)
        owner = self._owner(run_id)
        batch = [(event, encode_event(event, self.cipher)) for event in events]

        def stage(tail: RunTail) -> RunTail:
            info = tail.info
            check_next(run_id, info.last_seq, first_seq, epoch, info.writer_epoch)
            return dataclasses.replace(tail, info=info.after(list(events)))

        await owner.submit(Change(run_id, stage, events=batch))

    # -- the run index -------------------------------------------------------------------

    async def read(
        self, run_id: str, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> AsyncIterator[Event]:
        """The run's events; an owned run's recent ones from its owner's commits.

        See :class:`~agentlog.eventlog.kafka._changes.RecentEvents`: the bytes
        are decoded and checked as a broker read's are; anything they do not
        cover is read from the broker.
        """
        await self._read_your_writes(run_id)
        check_run_id(run_id)
        owner = self.member.owner(self.layout.partition_of(run_id)) if self.member else None
        tail = owner.tails.get(run_id) if owner is not None else None
        if owner is not None and tail is not None and tail.has_entry:
            kept = owner.recent.covering(tail, max(after_seq, 0), upto_seq)
            if kept is not None:
                where = f"run {run_id!r} as committed by this owner (partition {owner.partition})"
                for seq, value in kept:
                    event = decode_event(value, where=where, cipher=self.cipher)
                    if event.run_id != run_id or event.seq != seq:
                        raise CorruptEventError(run_id, seq, "a kept event is not this one", where)
                    yield event
                return
            # Its owner knows where its events end: read up to there, never to the
            # partition's end (every later run's events), and no index catch-up.
            entry = tail.entry(owner.partition)
            async for event in self._read_entry(run_id, entry, after_seq, upto_seq, tail.offset):
                yield event
            return
        async for event in super().read(run_id, after_seq=after_seq, upto_seq=upto_seq):
            yield event

    async def load_snapshot(
        self, run_id: str, *, at_or_before: int | None = None
    ) -> Snapshot | None:
        await self._read_your_writes(run_id)
        check_run_id(run_id)
        if self.member is not None and self.member.owner(self.layout.partition_of(run_id)):
            # Its owner wrote every snapshot since it read them on opening: no read.
            for kept in reversed(await self._reader.snapshots(run_id, caught_up=True)):
                if at_or_before is None or kept.snapshot.seq <= at_or_before:
                    return self._opened_snapshot(kept.snapshot)
            return None
        return await super().load_snapshot(run_id, at_or_before=at_or_before)

    async def find_run(self, run_id: str) -> RunInfo | None:
        check_run_id(run_id)
        await self._read_your_writes(run_id)
        owner = self.member.owner(self.layout.partition_of(run_id)) if self.member else None
        if owner is not None:
            tail = owner.tails.get(run_id)
            return tail.info if tail is not None and tail.has_entry else None
        return await super().find_run(run_id)

    async def list_runs(self, *, status: str | None = None) -> list[RunInfo]:
        """Every run's row: an owned partition's from its owner's tails (see
        :meth:`_owned_rows`), the others' from their index entries and later events."""
        owned, rows = self._owned_rows()
        if not owned:
            return await super().list_runs(status=status)
        others = await self._reader.exact_many(await self._entries_besides(owned))
        return select_runs([*rows, *(entry.info for entry in others)], status)

    async def page_runs(self, query: RunQuery) -> RunsPage:
        """One page of the run list, as :meth:`KafkaEventLog.page_runs`, with an
        owned partition's rows (and counts) from its owner's tails."""
        owned, rows = self._owned_rows()
        if not owned:
            return await super().page_runs(query)
        entries = {e.info.run_id: e for e in await self._entries_besides(owned)}
        page = page_in_memory([*rows, *(entry.info for entry in entries.values())], query)
        read = [entries[info.run_id] for info in page.rows if info.run_id in entries]
        exact = {entry.info.run_id: entry.info for entry in await self._reader.exact_many(read)}
        return RunsPage([exact.get(i.run_id, i) for i in page.rows], page.total, page.counts)

    def _owned_rows(self) -> tuple[list[int], list[RunInfo]]:
        """The partitions owned now, and their runs' rows from their owners' tails.

        The reader keeps a second row of an owned run, its latest index entry
        on the runs topic, which can be stale: a previous owner's lease (a dead
        worker never let go; its new owner dropped it on opening), or the
        events since the entry. A list of the worker's own runs (``runs``, the
        UI, a pass's queue counts) must see what its owner holds."""
        if self.member is None:
            return [], []
        owned = self.member.owned()
        owners = [self.member.owners[p] for p in owned]
        return owned, [t.info for o in owners for t in o.tails.values() if t.has_entry]

    async def _entries_besides(self, owned: list[int]) -> list[IndexEntry]:
        """The index entries of every runs-topic partition not in ``owned``."""
        return [
            entry
            for p in self.layout.runs_partitions()
            if p not in owned
            for entry in await self._reader.entries(p)
        ]

    async def runnable(self, *, now: datetime | None = None, limit: int = 1000) -> list[RunInfo]:
        """Runs of the owned partitions that need a worker now, oldest first."""
        now = now or utcnow()
        due = [t.info for t in self._live_tails() if t.info.needs_worker(now)]
        due.sort(key=lambda info: info.wake_at or info.updated_at or now)
        return due[:limit]

    async def next_wake(self) -> datetime | None:
        wakes = [
            t.info.wake_at
            for t in self._live_tails()
            if t.info.status == RunStatus.WAITING and t.info.wake_at is not None
        ]
        return min(wakes, default=None)

    # -- writers ---------------------------------------------------------------------------

    async def claim_writer(
        self,
        run_id: str,
        *,
        owner: str = "",
        lease_seconds: float | None = None,
        force: bool = True,
    ) -> int:
        """Bump the run's epoch in its partition's next transaction.

        Leases count only among this process's drivers: the partition's
        ownership fences every other process.
        """
        partition_owner = self._owner(run_id)
        expires = lease_expiry(lease_seconds)
        epochs: list[int] = []

        def stage(tail: RunTail) -> RunTail:
            info = claimed(tail.info, owner=owner, expires=expires, force=force)
            epochs.append(info.writer_epoch)
            return dataclasses.replace(tail, info=info)

        await partition_owner.submit(Change(run_id, stage, index=True))
        return epochs[-1]

    async def renew_lease(self, run_id: str, epoch: int, lease_seconds: float) -> None:
        await self._lease(run_id, epoch, lease_expiry(lease_seconds))

    async def release_lease(self, run_id: str, epoch: int) -> None:
        await self._lease(run_id, epoch, None)

    async def _lease(self, run_id: str, epoch: int, expires: datetime | None) -> None:
        owner = self._owner(run_id)

        def stage(tail: RunTail) -> RunTail:
            current = tail.info if tail.has_entry else None
            return dataclasses.replace(tail, info=leased(current, run_id, epoch, expires, self.url))

        await owner.submit(Change(run_id, stage, index=True))

    # -- snapshots and retention ----------------------------------------------------------

    async def save_snapshot(self, snapshot: Snapshot) -> None:
        """Save in the owner's next transaction, from the tail and snapshots the
        owner holds (nobody else writes them): no read of the runs topic."""
        run_id = snapshot.run_id
        owner = self._owner(run_id)
        tail = owner.tails.get(run_id)
        if tail is None or not tail.has_entry:
            raise UnknownRunError(run_id, self.url)
        offset = await self._reader.snapshot_offset(tail.entry(owner.partition), snapshot.seq)
        stored = await self._reader.snapshots(run_id, caught_up=True)
        await self._store_snapshot(snapshot, offset, stored)

    async def _write_runs(
        self, run_id: str, records: list[tuple[bytes, bytes | None]], doing: str, fix: str
    ) -> None:
        del doing, fix
        await self._owner(run_id).submit(Change(run_id, records=records))

    async def prune(self, run_id: str, *, keep_latest_snapshot: bool = False) -> None:
        """Mark the run archived in its owner's next transaction (see KafkaEventLog.prune)."""
        owner = self._owner(run_id)
        kept = await self._reader.snapshots(run_id)
        drop = kept[:-1] if keep_latest_snapshot else kept
        records: list[tuple[bytes, bytes | None]] = [
            (snapshot_key(run_id, old.snapshot.seq), None) for old in drop
        ]

        def stage(tail: RunTail) -> RunTail:
            if not tail.has_entry or tail.pruned:
                return tail
            info = dataclasses.replace(tail.info, archived=True)
            return dataclasses.replace(
                tail,
                info=info,
                pruned=True,
                first_offset=tail.offset,
                archived_seq=tail.info.last_seq,
            )

        await owner.submit(Change(run_id, stage, records=records, index=True))
        await self._reader.catch_up([self.layout.runs_partition(run_id)])

    # -- commands ---------------------------------------------------------------------------

    async def send_command(self, command: Command) -> Command:
        """Produce the command to its run's commands partition (idempotent, acks=all).

        Returns:
            The command with ``ref`` = ``(partition, offset)``, for :meth:`command_outcome`.
        """
        value = encode_command(command, self.cipher)
        partition = self.layout.partition_of(command.run_id)
        doing = f"cannot send the {command.kind} command of run {command.run_id!r}"
        with kafka_errors(doing, "nothing was recorded; send it again once the broker answers"):
            sent = await self._plain.send_and_wait(
                self.layout.commands,
                value,
                key=command.run_id.encode("utf-8"),
                partition=partition,
            )
        recorded = dataclasses.replace(command, ref=(partition, int(sent.offset)))
        if command.kind == "start" and self.member is None:
            # A client's submit returns at once; its reads of the run wait for
            # the start. (A member never waits on itself: its worker applies it.)
            self._unsettled.setdefault(command.run_id, []).append(recorded)
        return recorded

    async def command_outcome(self, command: Command) -> bool:
        """Wait for the owner's reply to ``command`` (see :mod:`~agentlog.eventlog.kafka._replies`).

        Once it says applied, this log's reads show the command's effect.

        Raises:
            BackendUnavailableError: no reply within ``KafkaConfig.command_timeout_s``.
            ConfigError: ``command`` was not returned by :meth:`send_command`.
        """
        partition, offset = command_ref(command)
        if self._replies is None:
            self._replies = ReplyWatch(self.layout, self._common, self.config.command_timeout_s)
        try:
            applied = await self._replies.outcome(command.run_id, command.kind, partition, offset)
        except BackendUnavailableError:
            self._settle(command)  # its caller hears why; later reads answer as they can
            raise
        self._settle(command)
        return applied

    def _settle(self, command: Command) -> None:
        unsettled = self._unsettled.get(command.run_id, [])
        if command in unsettled:
            unsettled.remove(command)
        if not unsettled:
            self._unsettled.pop(command.run_id, None)

    async def _read_your_writes(self, run_id: str) -> None:
        """Wait until the starts this log sent for ``run_id`` are applied or refused,
        so that a read right after a submit sees the run.

        Raises:
            BackendUnavailableError: no worker answered a start in ``command_timeout_s``.
        """
        while self._unsettled.get(run_id):
            await self.command_outcome(self._unsettled[run_id][0])

    async def take_commands(self, *, limit: int = 100) -> list[Command]:
        """Commands of the owned partitions, each handed out once per ownership."""
        return self.member.take(limit) if self.member else []

    async def ack_command(self, command: Command) -> None:
        """Done with ``command``: see :mod:`~agentlog.eventlog.kafka._ownership` for the rule."""
        if self.member is not None:
            await self.member.ack(command)

    # -- queue slots (eventlog/_queue_slots.py) ----------------------------------------------

    async def hold_slot(self, ask: SlotAsk) -> SlotGrant | None:
        """Ask the queue's admitter (the owner of the queue name's partition) for
        the run's slot, and wait for its answer (at most ``ask.lease_s``: an
        answer later than the lease could not be used).

        Raises:
            BackendUnavailableError: no answer in time (no owner of that partition).
        """
        partition, offset = await self._ask(ask, "hold")
        if self._replies is None:
            self._replies = ReplyWatch(self.layout, self._common, self.config.command_timeout_s)
        applied, reply = await self._replies.answer(
            ask.run_id, f"queue {ask.queue!r} slot", partition, offset, ask.lease_s
        )
        return decode_grant(reply) if applied else None

    async def release_slot(self, queue: str, run_id: str, epoch: int = 0) -> None:
        """Tell the queue's admitter the run let go of its slot (not waited for)."""
        await self._ask(SlotAsk(queue, run_id, 0.0, False, epoch=epoch), RELEASE)

    async def _ask(self, ask: SlotAsk, kind: str) -> tuple[int, int]:
        partition = self.layout.partition_of(ask.queue)
        doing = f"cannot ask queue {ask.queue!r} for run {ask.run_id!r}'s slot"
        with kafka_errors(doing, "nothing was granted; the run stays queued"):
            sent = await self._plain.send_and_wait(
                self.layout.commands,
                encode_ask(ask, kind),
                key=ask.run_id.encode("utf-8"),
                partition=partition,
            )
        return partition, int(sent.offset)

    # -- lifecycle ----------------------------------------------------------------------------

    async def close(self) -> None:
        try:
            if self._replies is not None:
                await self._replies.stop()
            if self.member is not None:
                await self.member.stop()
        finally:
            await super().close()
