"""The EventLog seam, by role: the write side on top of the read side.

:class:`EventReader` (:mod:`agentlog.eventlog._reader`, re-exported here) is
the read side: a run's events (``read``, ``tail``), its index row
(``find_run``, ``get_run``, ``list_runs``) and its snapshots
(``load_snapshot``). A read-only source implements it alone, as the
archive's history does.

:class:`EventLog` is the full read+write seam every backend implements. A
backend stores, per run id:

* the events, append-only, with conditional append (the batch's first seq
  must be the run's next seq, and its writer epoch the run's current one);
* a small run index (workflow, status, last seq, steps, writer lease) kept in
  step with the events by :meth:`RunInfo.after`;
* the writer claim: a monotonically increasing epoch plus an optional lease,
  so that a newer writer fences older ones and a crashed writer's runs can be
  taken over once its lease expires. The decisions are written once, in
  :mod:`agentlog.eventlog._fencing`, and each backend calls them inside its
  own transaction;
* the latest snapshots (the last ``keep_snapshots``, plus the older ones
  they build on: see :func:`snapshots_kept_from`), opaque bytes that the
  projector writes.

What is optional (a command queue instead of direct writes, pruning, a tail
woken by notification) is declared in :class:`Capabilities`, not forced.

Backends: :class:`~agentlog.eventlog.memory.MemoryEventLog` for unit tests,
:class:`~agentlog.eventlog.sqlite._log.SqliteEventLog` (the embedded default) and
``KafkaEventLog``. All pass the contract shipped in :mod:`agentlog.testing`;
docs/backends.md says how to write one.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from agentlog.errors import ConfigError, ConflictError
from agentlog.eventlog._fencing import (
    check_epoch,
    check_lease,
    check_next,
    claimed,
    lease_expiry,
    leased,
)
from agentlog.eventlog._reader import EventReader
from agentlog.eventlog._records import (
    COMMAND_KINDS,
    Command,
    RunInfo,
    Snapshot,
    select_runs,
    snapshots_kept_from,
)
from agentlog.eventlog._run_pages import RunQuery, RunsPage
from agentlog.eventlog._sealing import seal_blob
from agentlog.eventlog.events import Event, RunStatus, utcnow

__all__ = [
    "COMMAND_KINDS",
    "Capabilities",
    "Command",
    "EventLog",
    "EventReader",
    "RunInfo",
    "RunQuery",
    "RunsPage",
    "Snapshot",
    "check_batch",
    "check_epoch",
    "check_lease",
    "check_next",
    "check_run_id",
    "claimed",
    "lease_expiry",
    "leased",
    "select_runs",
    "snapshots_kept_from",
]


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


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a log does beyond the core of the seam, declared by its backend.

    Callers (the runtime, the worker, the archiver, the CLI) check these
    flags instead of calling a method to see whether it raises, and the
    shipped contract suite (:mod:`agentlog.testing`) skips what a backend
    does not claim.
    """

    direct_writes: bool = True
    """Any process may claim a run and append to it, fenced by the run's
    epoch. False: workers own the runs (by partition) and clients send
    :class:`Command` s instead (``commands`` must then be True)."""
    commands: bool = False
    """The log queues :class:`Command` s for the worker that owns a run:
    :meth:`EventLog.send_command`, :meth:`~EventLog.take_commands` and
    :meth:`~EventLog.ack_command` work."""
    prune: bool = True
    """:meth:`EventLog.prune` deletes archived runs' events; the archiver
    refuses a log without it rather than leave a run half pruned."""
    live_tail: bool = False
    """:meth:`EventReader.tail` wakes as soon as an event is recorded (through
    this instance, or by a server's notification) instead of polling every
    ``poll_seconds``."""

    claims_seen: bool = True
    """A claim committed by one process is seen by the next read of the run
    index from any process (one database). A queue can then be counted from
    the run index (:mod:`agentlog.runtime._queue_admission`). False on Kafka,
    whose index is read partition by partition with no such promise: there a
    queue needs the log's own admitter (:class:`~agentlog.eventlog._queue_slots.QueueSlots`)."""

    def __post_init__(self) -> None:
        if not (self.direct_writes or self.commands):
            raise ConfigError(
                "a log that takes neither direct writes nor commands cannot be written: "
                "make it an EventReader (the read side) instead"
            )


class EventLog(EventReader):
    """The write side on top of the read side: append-only, per-run event
    storage with fencing, leases, snapshots and retention.

    A backend implements the abstract methods; the claim and lease decisions
    come from :mod:`agentlog.eventlog._fencing`, called inside the backend's
    own transaction. What is optional is declared in :attr:`capabilities`.
    One instance may be shared by many tasks of one event loop.
    """

    #: What this log does beyond the core (see :class:`Capabilities`).
    capabilities: Capabilities = Capabilities()

    @property
    def direct_writes(self) -> bool:
        """True: any process may claim a run and write to it (fenced by the run's
        epoch). False: workers own the runs and clients send :class:`Command` s
        (:meth:`send_command`). Short for ``capabilities.direct_writes``."""
        return self.capabilities.direct_writes

    def _sealed_snapshot(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` as stored: its state sealed when a cipher is set."""
        if self.cipher is None:
            return snapshot
        state = seal_blob(self.cipher, snapshot.run_id, snapshot.seq, "snapshot", snapshot.state)
        return dataclasses.replace(snapshot, state=state)

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

    # -- runs to drive (workers) ------------------------------------------------

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
        appends now fail with FencedError. A backend writes
        :func:`~agentlog.eventlog._fencing.claimed` of the run's row in one
        transaction.

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

    # -- commands (Capabilities.commands) --------------------------------------------

    async def send_command(self, command: Command) -> Command:
        """Record a client's request durably for the run's owning worker.

        Returns:
            The command as recorded (its ``ref`` says where), for
            :meth:`command_outcome`.

        Raises:
            ConfigError: this log has no command queue (``capabilities.commands``
                is False); claim the run and append instead.
        """
        raise ConfigError(f"{self.url} takes direct writes; it has no command queue")

    async def command_outcome(self, command: Command) -> bool | None:
        """Wait until the run's owner applied or refused ``command`` (as
        :meth:`send_command` returned it).

        A client that waits for the outcome learns whether its request won
        (two answers to one interrupt: one is applied, the other refused), and
        once it is applied this log's reads show its effect.

        Returns:
            True: applied, its effect recorded. False: refused, nothing
            recorded (the run no longer fit the request: another request went
            first). None: this log does not report outcomes (the default).

        Raises:
            BackendUnavailableError: no owner answered in the log's time
                bound; the command stays queued and is applied or refused
                when an owner takes it.
        """
        del command
        return None

    async def take_commands(self, *, limit: int = 100) -> list[Command]:
        """Commands for the runs this process owns, oldest first; each is
        handed out until it is acked (applied or refused)."""
        return []

    async def ack_command(self, command: Command) -> None:
        """Mark ``command`` consumed. On Kafka the ack joins the transaction of
        the command partition's next commit, so a command is applied exactly
        once; acking a refused command commits it alone."""

    # -- snapshots ----------------------------------------------------------------

    @abc.abstractmethod
    async def save_snapshot(self, snapshot: Snapshot) -> None:
        """Store a snapshot (replacing one at the same seq), keeping only the
        newest ``keep_snapshots`` per run and the older ones they build on
        (:func:`snapshots_kept_from`).

        Raises:
            UnknownRunError: a backend may refuse the snapshot of a run it has
                no record of (no event, no claim) and then stores nothing: the
                Kafka log does, since its snapshot records the offset a resume
                seeks to, which such a run does not have. The runtime only
                snapshots runs it has written.
        """

    # -- retention (Capabilities.prune) ---------------------------------------------

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

        Raises:
            ConfigError: the log does not prune (``capabilities.prune`` is
                False); this default raises it, and a backend that prunes
                overrides it.
        """
        raise ConfigError(
            f"{self.url} cannot prune run {run_id!r}: its backend does not delete events "
            "(capabilities.prune is False); keep the run in the hot log"
        )

    async def prune_many(
        self, run_ids: Sequence[str], *, keep_latest_snapshot: bool = False
    ) -> None:
        """:meth:`prune` each run; the SQL logs prune them all in one transaction."""
        for run_id in run_ids:
            await self.prune(run_id, keep_latest_snapshot=keep_latest_snapshot)
