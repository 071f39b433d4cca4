"""The EventLog seam: the one interface every backend implements.

A backend stores, per run id:

* the events, append-only, with conditional append (the batch's first seq
  must be the run's next seq, and its writer epoch the run's current one);
* a small run index (workflow, status, last seq, steps, writer lease) kept in
  step with the events by :meth:`RunInfo.after`;
* the writer claim: a monotonically increasing epoch plus an optional lease,
  so that a newer writer fences older ones and a crashed writer's runs can be
  taken over once its lease expires;
* the latest snapshots (the last ``keep_snapshots``, plus the older ones
  they build on: see :func:`snapshots_kept_from`), opaque bytes that the
  projector writes.

Backends: :class:`~agentlog.eventlog.memory.MemoryEventLog` for unit tests,
:class:`~agentlog.eventlog.sqlite.SqliteEventLog` (the embedded default) and
``KafkaEventLog``. All pass ``tests/contract/eventlog_contract.py``.
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Self

from agentlog.crypto import PayloadCipher
from agentlog.errors import (
    ConfigError,
    ConflictError,
    EventLogError,
    FencedError,
    LeaseHeldError,
    UnknownRunError,
)
from agentlog.eventlog.events import (
    LANGGRAPH_WORKFLOW,
    Event,
    EventData,
    InterruptRaised,
    RunStarted,
    RunStatus,
    StepCompleted,
    status_after,
    status_after_event,
    utcnow,
)
from agentlog.eventlog.sealing import open_blob, seal_blob

__all__ = [
    "COMMAND_KINDS",
    "Command",
    "EventLog",
    "RunInfo",
    "Snapshot",
    "check_batch",
    "check_lease",
    "check_next",
    "check_run_id",
    "select_runs",
    "snapshots_kept_from",
]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A run's projected state as of ``seq``, encoded by the projector."""

    run_id: str
    seq: int
    state: bytes
    """The projector's msgpack bytes. Never starting with 0xC1 (a byte msgpack
    never uses): that marks a state sealed at rest (:mod:`agentlog.crypto`)."""
    created_at: datetime
    base_seq: int = 0
    """The oldest snapshot this one builds on (its chain's base), which the
    backend must keep as long as it keeps this one; 0 when it stands alone."""


def snapshots_kept_from(kept: Iterable[tuple[int, int]], keep: int) -> int:
    """The lowest seq a run's snapshot store keeps: the newest ``keep``
    snapshots and every older one they build on.

    The one retention rule of every backend, so that a delta snapshot never
    outlives the base it needs.

    Args:
        kept: ``(seq, base_seq)`` of each of the run's stored snapshots.
        keep: how many of the newest to keep (``keep_snapshots``).
    """
    newest = sorted(kept, reverse=True)[:keep]
    return min((base or seq for seq, base in newest), default=0)


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One row of the run index."""

    run_id: str
    workflow: str = ""
    version: str = ""
    status: str = RunStatus.RUNNING
    last_seq: int = 0
    steps: int = 0
    started_at: datetime | None = None
    updated_at: datetime | None = None
    writer_epoch: int = 0
    lease_owner: str = ""
    lease_expires_at: datetime | None = None
    wake_at: datetime | None = None
    """While the run waits: when its earliest timer is due (a sleep's end, or
    an interrupt's timeout). A worker fires it then; see :meth:`EventLog.runnable`."""
    archived: bool = False
    """True once :meth:`EventLog.prune` moved the run's events to the archive.

    The row stays (a tombstone) so that the run id stays taken: starting it
    again returns the archived run instead of forking a second history.
    """

    def after(self, events: Sequence[Event]) -> RunInfo:
        """This row once ``events`` (the next batch of the run) are recorded."""
        workflow, version, status = self.workflow, self.version, self.status
        steps, started, wake = self.steps, self.started_at, self.wake_at
        for event in events:
            status = status_after_event(status, event.data)
            if isinstance(event.data, InterruptRaised):
                # A run parks with every open interrupt raised again, so the
                # earliest due time among this park's interrupts is the wake-up.
                due = event.data.due_at
                if due is not None and (wake is None or due < wake):
                    wake = due
            elif status != RunStatus.WAITING:
                wake = None
            if isinstance(event.data, StepCompleted):
                steps += 1
            elif isinstance(event.data, RunStarted):
                workflow, version = event.data.workflow, event.data.version
                started = started or event.ts
        return dataclasses.replace(
            self,
            workflow=workflow,
            version=version,
            status=status,
            last_seq=events[-1].seq,
            steps=steps,
            started_at=started,
            updated_at=events[-1].ts,
            wake_at=wake,
        )

    def needs_worker(self, now: datetime) -> bool:
        """True if a worker should drive the run now: it is running and no live
        writer holds it, or it waits on a timer that is due. A LangGraph thread
        never does: the application that invokes its graph drives it."""
        if self.workflow == LANGGRAPH_WORKFLOW:
            return False
        if self.archived and self.status != RunStatus.RUNNING:
            return False
        if self.lease_expires_at is not None and self.lease_expires_at > now:
            return False
        if self.status == RunStatus.RUNNING:
            return self.last_seq > 0
        return self.status == RunStatus.WAITING and self.wake_at is not None and self.wake_at <= now


@dataclass(frozen=True, slots=True)
class Command:
    """A client's request about a run, for the worker that owns the run.

    On a log with ``direct_writes`` (SQLite, memory) a client records its
    request itself (it claims the run, appends, lets go). On a log where
    workers own partitions of runs (Kafka with a consumer group), a client
    sends a Command instead and the owning worker applies it, so that every
    run has one writer, fenced by its partition's ownership.
    """

    run_id: str
    kind: str
    """"start", "resume", "retry", "cancel" or "shred" (record RunShredded)."""
    data: EventData
    """What to record: RunStarted, ResumeReceived, RunRetried or RunCancelled."""
    ref: object = None
    """The backend's handle on the command (its offset), for :meth:`EventLog.ack_command`."""


COMMAND_KINDS = ("start", "resume", "retry", "cancel", "shred")


def check_run_id(run_id: str) -> None:
    """Raise ConfigError for a run id that no backend can store.

    A run id is text that must encode as UTF-8 (for SQLite, Kafka keys and
    Parquet alike): a lone surrogate, which Python strings allow, would
    otherwise escape from a driver as UnicodeEncodeError.
    """
    if not isinstance(run_id, str):
        raise ConfigError(f"a run id must be a str, not {type(run_id).__name__}: {run_id!r}")
    try:
        run_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigError(
            f"run id {run_id!r} is not valid text: {exc.reason} at index {exc.start}; "
            "use a run id of plain UTF-8 text"
        ) from exc


def check_batch(events: Sequence[Event]) -> tuple[str, int, int]:
    """Validate a batch's shape; return its run id, first seq and epoch.

    Raises:
        ValueError: an empty batch, or one that mixes runs or epochs.
        ConflictError: seqs inside the batch that are not consecutive.
    """
    if not events:
        raise ValueError("append needs at least one event")
    first = events[0]
    check_run_id(first.run_id)
    for offset, event in enumerate(events):
        if event.run_id != first.run_id or event.writer_epoch != first.writer_epoch:
            raise ValueError("one append batch must hold one run and one writer epoch")
        if event.seq != first.seq + offset:
            raise ConflictError(first.run_id, first.seq + offset, event.seq)
    return first.run_id, first.seq, first.writer_epoch


def select_runs(rows: Iterable[RunInfo], status: str | None) -> list[RunInfo]:
    """Runs with at least one event (in ``status``, if given), newest update first."""
    chosen = [r for r in rows if r.last_seq and status in (None, r.status)]
    return sorted(chosen, key=lambda r: r.updated_at or utcnow(), reverse=True)


def check_lease(info: RunInfo) -> None:
    """Raise LeaseHeldError if another writer's lease on the run is still live."""
    now = utcnow()
    if info.lease_expires_at is not None and info.lease_expires_at > now:
        raise LeaseHeldError(
            info.run_id, info.lease_owner, (info.lease_expires_at - now).total_seconds()
        )


def check_next(run_id: str, last_seq: int, first_seq: int, epoch: int, current: int) -> None:
    """Raise the conflict or fencing error that the append deserves, if any."""
    if epoch < current:
        raise FencedError(run_id, epoch, current)
    if epoch > current:
        raise EventLogError(
            f"run {run_id!r}: writer epoch {epoch} was never claimed (current is "
            f"{current}); call claim_writer() before appending."
        )
    if first_seq != last_seq + 1:
        raise ConflictError(run_id, last_seq + 1, first_seq)


class EventLog(abc.ABC):
    """Append-only, per-run event storage with fencing and snapshots.

    Every method is a coroutine; one instance may be shared by many tasks of
    one event loop. Use it as an async context manager, or call :meth:`close`.
    """

    #: A URL that opens this log again, such as ``sqlite:///.agentlog/agentlog.db``.
    url: str = ""

    #: True: any process may claim a run and write to it (fenced by the run's
    #: epoch). False: workers own the runs (by partition) and clients send
    #: :class:`Command` s instead (:meth:`send_command`).
    direct_writes: bool = True

    #: Seals payload content and snapshots at rest with per-run data keys
    #: (see :mod:`agentlog.eventlog.sealing`); None stores them in clear.
    cipher: PayloadCipher | None = None

    def _sealed_snapshot(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` as stored: its state sealed when a cipher is set."""
        if self.cipher is None:
            return snapshot
        state = seal_blob(self.cipher, snapshot.run_id, snapshot.seq, "snapshot", snapshot.state)
        return dataclasses.replace(snapshot, state=state)

    def _opened_snapshot(self, snapshot: Snapshot | None) -> Snapshot | None:
        """A stored snapshot with its state opened (plain ones pass through).

        Raises:
            ShreddedError, KeyStoreMissingError and the other EncryptionErrors.
        """
        if snapshot is None:
            return None
        state = open_blob(self.cipher, snapshot.run_id, snapshot.seq, "snapshot", snapshot.state)
        return snapshot if state is snapshot.state else dataclasses.replace(snapshot, state=state)

    # -- events ---------------------------------------------------------------

    @abc.abstractmethod
    async def append(self, events: Sequence[Event], *, durable: bool = True) -> None:
        """Append a batch of one run's events, all or nothing.

        Args:
            events: consecutive events of one run and one writer epoch. The
                first seq must be the run's last seq plus one.
            durable: when True the batch is on stable storage before this
                returns (fsync, or acks=all and committed); when False it may
                sit in OS buffers, and a power loss could drop it.

        Raises:
            ConflictError: the first seq is a duplicate or leaves a gap.
            FencedError: a newer writer claimed the run.
        """

    @abc.abstractmethod
    def read(
        self, run_id: str, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> AsyncIterator[Event]:
        """The run's events with ``after_seq < seq <= upto_seq``, in seq order.

        The seqs come with no gap, up to ``upto_seq`` or the run's last seq.

        Raises:
            UnknownRunError: nothing was ever recorded for ``run_id``.
            RunArchivedError: the run was pruned (``RunInfo.archived``) and
                the range starts before the first event still stored; read
                it through the archive.
            CorruptEventError: a stored event does not decode or fails its
                checksum, or a seq is missing; it names the run and the seq.
        """

    async def tail(
        self, run_id: str, *, after_seq: int = 0, poll_seconds: float = 0.05
    ) -> AsyncIterator[Event]:
        """Follow the run: yield events as they are recorded.

        Ends after the run's terminal event (completed, failed or cancelled).
        Backends without change notification poll every ``poll_seconds``.
        """
        while True:
            async for event in self.read(run_id, after_seq=after_seq):
                after_seq = event.seq
                yield event
                if status_after("", event.type) in RunStatus.TERMINAL:
                    return
            await asyncio.sleep(poll_seconds)

    # -- the run index ----------------------------------------------------------

    @abc.abstractmethod
    async def find_run(self, run_id: str) -> RunInfo | None:
        """The run's index row, or None if the run is unknown."""

    async def get_run(self, run_id: str) -> RunInfo:
        """The run's index row. Raises UnknownRunError if it is unknown."""
        info = await self.find_run(run_id)
        if info is None or info.last_seq == 0:
            raise UnknownRunError(run_id, self.url)
        return info

    @abc.abstractmethod
    async def list_runs(self, *, status: str | None = None) -> list[RunInfo]:
        """Every run with at least one event, most recently updated first."""

    async def runnable(self, *, now: datetime | None = None, limit: int = 1000) -> list[RunInfo]:
        """Runs a worker should drive now (:meth:`RunInfo.needs_worker`), oldest first.

        Running runs that no live writer holds (just submitted or resumed, or
        whose writer died) and waiting runs whose timer is due. Backends with
        an index answer this without reading every run.
        """
        now = now or utcnow()
        due = [info for info in await self.list_runs() if info.needs_worker(now)]
        due.sort(key=lambda info: info.wake_at or info.updated_at or now)
        return due[:limit]

    async def next_wake(self) -> datetime | None:
        """The earliest due time of any waiting run's timer (None: no timer)."""
        wakes = [i.wake_at for i in await self.list_runs(status=RunStatus.WAITING) if i.wake_at]
        return min(wakes, default=None)

    # -- writers ----------------------------------------------------------------

    @abc.abstractmethod
    async def claim_writer(
        self,
        run_id: str,
        *,
        owner: str = "",
        lease_seconds: float | None = None,
        force: bool = True,
    ) -> int:
        """Become the run's only writer; return the new epoch.

        The epoch is one more than any earlier claim, so every older writer's
        appends now fail with FencedError.

        Args:
            owner: who claims (host and pid, say), shown in the run index.
            lease_seconds: how long the claim counts as live without a renewal;
                None means no lease: a later ``force=False`` claim succeeds.
            force: when False, raise LeaseHeldError instead of taking over a
                run whose lease is still live.
        """

    @abc.abstractmethod
    async def renew_lease(self, run_id: str, epoch: int, lease_seconds: float) -> None:
        """Extend the writer's lease. Raises FencedError if it was taken over."""

    @abc.abstractmethod
    async def release_lease(self, run_id: str, epoch: int) -> None:
        """End the writer's lease now (the epoch stays), unless fenced already."""

    # -- commands (logs without direct writes) ---------------------------------------

    async def send_command(self, command: Command) -> None:
        """Record a client's request durably for the run's owning worker.

        Raises:
            ConfigError: this log takes direct writes; claim the run instead.
        """
        raise ConfigError(f"{self.url} takes direct writes; it has no command queue")

    async def take_commands(self, *, limit: int = 100) -> list[Command]:
        """Commands for the runs this process owns, oldest first; each is
        handed out until it is acked (applied or refused)."""
        return []

    async def ack_command(self, command: Command) -> None:  # noqa: B027 - optional hook
        """Mark ``command`` consumed. On Kafka the ack joins the transaction of
        the command partition's next commit, so a command is applied exactly
        once; acking a refused command commits it alone."""

    # -- snapshots ----------------------------------------------------------------

    @abc.abstractmethod
    async def save_snapshot(self, snapshot: Snapshot) -> None:
        """Store a snapshot (replacing one at the same seq), keeping only the
        newest ``keep_snapshots`` per run and the older ones they build on
        (:func:`snapshots_kept_from`)."""

    @abc.abstractmethod
    async def load_snapshot(
        self, run_id: str, *, at_or_before: int | None = None
    ) -> Snapshot | None:
        """The newest snapshot with ``seq <= at_or_before`` (any seq if None)."""

    # -- retention ----------------------------------------------------------------

    @abc.abstractmethod
    async def prune(self, run_id: str, *, keep_latest_snapshot: bool = False) -> None:
        """Delete the run's events (and snapshots); keep its index row as a tombstone.

        Only the archiver calls this, and only after the run's archive write
        is confirmed. The index row stays with ``archived=True`` and every
        other field unchanged (status, last seq, workflow, version, writer
        epoch), so :meth:`find_run`, :meth:`get_run` and :meth:`list_runs`
        still see the run and its id stays taken: appending seq 1 again is a
        ConflictError, and an unfinished run continues at ``last_seq + 1``.
        Pruning an unknown run, or a pruned one again, changes nothing.

        Args:
            keep_latest_snapshot: keep the newest snapshot (and the older ones
                it builds on), so the run's state still loads from the hot
                store while its events live only in the archive.
        """

    # -- lifecycle ------------------------------------------------------------------

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections and files."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
