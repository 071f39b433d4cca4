"""The values that cross the EventLog seam: a run's index row, a snapshot, a command.

Re-exported by :mod:`agentlog.eventlog._base`, where backends import them from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter

from agentlog.eventlog.events import (
    LANGGRAPH_WORKFLOW,
    Event,
    EventData,
    InterruptRaised,
    RunAdmitted,
    RunForked,
    RunStarted,
    RunStatus,
    status_after_event,
    steps_after,
    utcnow,
)

__all__ = [
    "COMMAND_KINDS",
    "Command",
    "RunInfo",
    "Snapshot",
    "select_runs",
    "snapshots_kept_from",
]


def status_ended(status: str) -> bool:
    """True for a run that completed, failed or was cancelled: the one
    "has the run ended" rule (the log's tail, the mailboxes, prune)."""
    return status in RunStatus.TERMINAL


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


#: Events only a driven run records: a ``queued`` run with one is running.
_DRIVEN = frozenset({"TaskStarted", "StepCompleted", "StepFailed", "SuperstepCommitted"})

#: Events that leave a run's index row as it was but for its wake-up time (no
#: status of their own, none of :meth:`RunInfo.after`'s cases, not a step):
#: the fold skips them with one look-up, as most events of a long run are
#: (``tests/eventlog/test_run_row_quiet_events.py`` holds the skip to the rules).
_QUIET = frozenset({"TaskCompleted", "TaskFailed", "ProgressReported", "ValuePublished"})
#: An event's type name: a batch of quiet events only is found by C calls alone.
_TYPE_OF = attrgetter("data.type")


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
    queue: str = ""
    """The queue its workflow waits in (``RunStarted.limits["queue"]``), or ""."""
    priority: int = 0
    """Its priority in its queue: a lower number is admitted first."""
    admitted_at: datetime | None = None
    """When its queue admitted it (``RunAdmitted``); None while ``queued``."""

    def after(self, events: Sequence[Event]) -> RunInfo:
        """This row once ``events`` (the next batch of the run) are recorded."""
        if _QUIET.issuperset(map(_TYPE_OF, events)):  # task results only: tested in C
            last = events[-1]
            wake = self.wake_at if self.status == RunStatus.WAITING else None
            return dataclasses.replace(self, last_seq=last.seq, updated_at=last.ts, wake_at=wake)
        workflow, version, status = self.workflow, self.version, self.status
        steps, started, wake = self.steps, self.started_at, self.wake_at
        queue, priority, admitted = self.queue, self.priority, self.admitted_at
        quiet = _QUIET
        for event in events:
            if event.data.type in quiet:  # status, steps as they were; a wake-up kept if waiting
                if status != RunStatus.WAITING:
                    wake = None
                continue
            status = status_after_event(status, event.data)
            if isinstance(event.data, RunAdmitted):
                admitted = admitted or event.ts
            elif status == RunStatus.QUEUED and event.type in _DRIVEN:
                status = RunStatus.RUNNING  # driven unadmitted: its code has no queue now
            if isinstance(event.data, InterruptRaised):
                # A run parks with every open interrupt raised again, so the
                # earliest due time among this park's interrupts is the wake-up.
                due = event.data.due_at
                if due is not None and (wake is None or due < wake):
                    wake = due
            elif status != RunStatus.WAITING:
                wake = None
            steps = steps_after(steps, event.type)
            if isinstance(event.data, RunStarted):
                workflow, version = event.data.workflow, event.data.version
                started = started or event.ts
                queued = event.data.limits.get("queue")
                if isinstance(queued, dict):  # it waits for its queue to admit it
                    queue, priority = str(queued["name"]), int(queued.get("priority", 0))
                    status = RunStatus.QUEUED if admitted is None else status
            elif isinstance(event.data, RunForked):
                # A fork's copies keep the origin's times: it started at its marker.
                started = event.ts
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
            queue=queue,
            priority=priority,
            admitted_at=admitted,
        )

    def lease_live(self, now: datetime) -> bool:
        """True while a writer's lease on the run has not ended at ``now``.

        The one "is the lease live" rule, which a polite claim, a worker, a
        waiter, ``recover`` and the archiver all ask, so that they cannot
        disagree on a lease that ends exactly now (it is not live). The
        servers' SQL of it is rendered once per dialect by
        :func:`~agentlog.eventlog._claim_cases.sql_lease_ended`.
        """
        return self.lease_expires_at is not None and self.lease_expires_at > now

    def waits_for_room(self, now: datetime) -> bool:
        """True while the run waits for a slot in its queue (docs/queues.md): no
        writer holds a live lease on it, and it is ``queued`` (not admitted
        yet), or ``running`` after its admission (it resumed, or its worker
        died: it needs room in the concurrency limit again). The one rule
        that ``agentlog runs``, ``show`` and the UI say "waiting for room" by,
        on every backend. A worker that knows the workflow and finds room takes it."""
        if not self.queue or not self.last_seq or self.lease_live(now):
            return False
        if self.status == RunStatus.QUEUED:
            return True
        return self.status == RunStatus.RUNNING and self.admitted_at is not None

    def needs_worker(self, now: datetime) -> bool:
        """True if a worker should drive the run now: it is running and no live
        writer holds it, or it waits on a timer that is due. A LangGraph thread
        never does: the application that invokes its graph drives it."""
        if self.workflow == LANGGRAPH_WORKFLOW:
            return False
        if self.archived and self.status != RunStatus.RUNNING:
            return False
        if self.lease_live(now):
            return False
        if self.status in (RunStatus.RUNNING, RunStatus.QUEUED):
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


COMMAND_KINDS = ("start", "resume", "retry", "cancel", "shred", "send")


def select_runs(rows: Iterable[RunInfo], status: str | None) -> list[RunInfo]:
    """Runs with at least one event (in ``status``, if given), newest update first."""
    chosen = [r for r in rows if r.last_seq and status in (None, r.status)]
    return sorted(chosen, key=lambda r: r.updated_at or utcnow(), reverse=True)
