"""The in-memory backend: for unit tests and examples, never for production.

It passes the same contract as the durable backends, but everything it holds
is gone when the process ends (the pattern article's failure mode 2:
"MemorySaver in production").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime
from operator import attrgetter

from agentlog.crypto import PayloadCipher
from agentlog.errors import NotSerializableError
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
    snapshots_kept_from,
)
from agentlog.eventlog._indexed import IndexedEventLog, StoredRows
from agentlog.eventlog._tail import Changes, TailWake
from agentlog.eventlog.codec import encode_payload
from agentlog.eventlog.events import Event

__all__ = ["MemoryEventLog"]


def _stored_event(run_id: str, event: Event, where: str, cipher: PayloadCipher | None) -> Event:
    """A stored event as read: the very object appended (nothing was encoded)."""
    del run_id, where, cipher
    return event


class MemoryEventLog(IndexedEventLog):
    """Events, index and snapshots in dicts of this process."""

    #: Reads return the stored Event objects (the read path still checks their seqs).
    _stored = StoredRows(seq=attrgetter("seq"), event=_stored_event, found=lambda e: f"seq {e.seq}")

    def __init__(self, *, keep_snapshots: int = 3, commands: bool = False) -> None:
        """Args:
        keep_snapshots: how many of a run's newest snapshots to keep.
        commands: act like a log whose workers own the runs (Kafka with a
            consumer group): no direct writes from clients, who send
            :class:`Command` s that a worker takes and acks. For tests of
            that path without a broker.
        """
        self.url = "memory://"
        self.keep_snapshots = keep_snapshots
        self.capabilities = Capabilities(
            direct_writes=not commands, commands=commands, live_tail=True
        )
        self._commands: list[Command] = []
        self._events: dict[str, list[Event]] = {}
        self._runs: dict[str, RunInfo] = {}
        self._snapshots: dict[str, list[Snapshot]] = {}
        self._changes = Changes()

    async def append(self, events: Sequence[Event], *, durable: bool = True) -> None:
        run_id, first_seq, epoch = check_batch(events)
        info = self._runs.get(run_id) or RunInfo(run_id)
        check_next(run_id, info.last_seq, first_seq, epoch, info.writer_epoch)
        for event in events:  # the same serializability check the real stores make
            if event.packed is None:  # else the writer packed it already
                encode_payload(event.data)
            if event.ts.tzinfo is None:
                raise NotSerializableError(f"{event.type} seq {event.seq} ts", "naive datetime")
        # Stored timestamps read back as UTC, as they do from the real stores.
        events = [
            e if e.ts.tzinfo is UTC else dataclasses.replace(e, ts=e.ts.astimezone(UTC))
            for e in events
        ]
        self._events.setdefault(run_id, []).extend(events)
        self._runs[run_id] = info.after(events)
        self._changes.notify()

    async def _stored_seq(self, run_id: str, *, newest: bool) -> int | None:
        events = self._events.get(run_id)
        return (events[-1] if newest else events[0]).seq if events else None

    async def _event_rows(self, run_id: str, after: int, last: int, limit: int) -> list[Event]:
        # Events stored from seq `offset + 1` on: after a prune, the archive holds the rest.
        events = self._events.get(run_id, [])
        offset = events[0].seq - 1 if events else 0
        return events[after - offset : min(last, after + limit) - offset]

    async def _tail_wake(self, run_id: str, poll_seconds: float) -> TailWake:
        return self._changes.wake(None)  # nothing outside this process writes it

    async def find_run(self, run_id: str) -> RunInfo | None:
        check_run_id(run_id)
        return self._runs.get(run_id)

    async def send_command(self, command: Command) -> Command:
        if not self.capabilities.commands:
            return await super().send_command(command)
        check_run_id(command.run_id)
        encode_payload(command.data)  # what a real queue would store
        self._commands.append(command)
        self._changes.notify()
        return command

    async def take_commands(self, *, limit: int = 100) -> list[Command]:
        return self._commands[:limit]  # until acked, a command comes again

    async def ack_command(self, command: Command) -> None:
        self._commands = [c for c in self._commands if c is not command]

    async def list_runs(self, *, status: str | None = None) -> list[RunInfo]:
        return select_runs(self._runs.values(), status)

    async def claim_writer(
        self,
        run_id: str,
        *,
        owner: str = "",
        lease_seconds: float | None = None,
        force: bool = True,
    ) -> int:
        check_run_id(run_id)
        info = claimed(
            self._runs.get(run_id) or RunInfo(run_id),
            owner=owner,
            expires=lease_expiry(lease_seconds),
            force=force,
        )
        self._runs[run_id] = info
        return info.writer_epoch

    async def renew_lease(self, run_id: str, epoch: int, lease_seconds: float) -> None:
        self._lease(run_id, epoch, lease_expiry(lease_seconds))

    async def release_lease(self, run_id: str, epoch: int) -> None:
        self._lease(run_id, epoch, None)

    def _lease(self, run_id: str, epoch: int, expires: datetime | None) -> None:
        check_run_id(run_id)
        self._runs[run_id] = leased(self._runs.get(run_id), run_id, epoch, expires, self.url)

    async def save_snapshot(self, snapshot: Snapshot) -> None:
        check_run_id(snapshot.run_id)
        kept = self._snapshots.setdefault(snapshot.run_id, [])
        kept[:] = [s for s in kept if s.seq != snapshot.seq] + [snapshot]
        kept.sort(key=lambda s: s.seq)
        floor = snapshots_kept_from(((s.seq, s.base_seq) for s in kept), self.keep_snapshots)
        kept[:] = [s for s in kept if s.seq >= floor]

    async def load_snapshot(
        self, run_id: str, *, at_or_before: int | None = None
    ) -> Snapshot | None:
        check_run_id(run_id)
        for snapshot in reversed(self._snapshots.get(run_id, [])):
            if at_or_before is None or snapshot.seq <= at_or_before:
                return snapshot
        return None

    async def prune(self, run_id: str, *, keep_latest_snapshot: bool = False) -> None:
        check_run_id(run_id)
        info = self._runs.get(run_id)
        if info is None:
            return
        self._events.pop(run_id, None)
        kept = self._snapshots.pop(run_id, [])
        if keep_latest_snapshot and kept:
            floor = snapshots_kept_from([(kept[-1].seq, kept[-1].base_seq)], 1)
            self._snapshots[run_id] = [s for s in kept if s.seq >= floor]
        # The row stays as a tombstone: the run id stays taken.
        self._runs[run_id] = dataclasses.replace(info, archived=True)
