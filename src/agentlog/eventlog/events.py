"""The event envelope, the event vocabulary and the run's status.

An :class:`Event` is the envelope every backend stores: the run it belongs
to, its ``seq`` (1, 2, 3, ... per run, no gaps), when it was written, the
schema version its payload was written with, the writer epoch that wrote it,
and its ``data``: one of the frozen payload classes, defined in the private
``_payloads`` module and re-exported here (import them from here; the codec
knows them by their stored ``type`` names, never by their module).
:class:`RunStatus` and the functions below it say what each event does to
the run index.

Payloads carry builtin values only (see :mod:`agentlog.eventlog.codec`).
A step records its writes as a *delta*, never the full state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import ClassVar

from agentlog.eventlog._payloads import (
    EVENT_TYPES,
    Branch,
    CheckpointSaved,
    CheckpointsRemoved,
    EventData,
    InterruptRaised,
    MessageReceived,
    MessageSent,
    ProgressReported,
    ResumeReceived,
    RunAdmitted,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunForked,
    RunMigrated,
    RunRetried,
    RunShredded,
    RunStarted,
    StepCompleted,
    StepFailed,
    SuperstepCommitted,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
    TimerFired,
    ValuePublished,
    WriterClaimed,
    WritesSaved,
)
from agentlog.eventlog._payloads import LANGGRAPH_WORKFLOW as LANGGRAPH_WORKFLOW

__all__ = [
    "Branch",
    "CheckpointSaved",
    "CheckpointsRemoved",
    "EVENT_TYPES",
    "SCHEMA_V",
    "Event",
    "EventData",
    "InterruptRaised",
    "MessageReceived",
    "MessageSent",
    "ProgressReported",
    "ResumeReceived",
    "RunAdmitted",
    "RunCancelled",
    "RunCompleted",
    "RunFailed",
    "RunForked",
    "RunMigrated",
    "RunRetried",
    "RunShredded",
    "RunStarted",
    "RunStatus",
    "StepCompleted",
    "StepFailed",
    "SuperstepCommitted",
    "TaskCompleted",
    "TaskFailed",
    "TaskStarted",
    "TimerFired",
    "ValuePublished",
    "WriterClaimed",
    "WritesSaved",
    "status_after",
    "status_after_event",
    "steps_after",
    "utcnow",
]

#: The schema version this code writes. Older versions are upcast on read.
SCHEMA_V = 1


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Event:
    """The envelope of one immutable, recorded event."""

    run_id: str
    seq: int
    data: EventData
    ts: datetime = field(default_factory=utcnow)
    writer_epoch: int = 0
    schema_v: int = SCHEMA_V
    #: The encrypted content as stored (see :mod:`agentlog.eventlog._sealing`),
    #: kept so that copies (the archive) carry the ciphertext, never the plaintext.
    sealed: bytes | None = field(default=None, compare=False, repr=False)
    #: Why the content could not be opened here (no key store, shredded...):
    #: its content fields are None, and folding the event raises this.
    unreadable: Exception | None = field(default=None, compare=False, repr=False)
    #: The payload's msgpack bytes (the map of its fields) as the run's writer
    #: packed them to check it (:meth:`~agentlog.runtime._writer.RunWriter.emit`),
    #: stored as they are by a log that stores clear payloads, so that each
    #: event is packed once. Not an argument: the writer sets it on the events
    #: it makes, and a copy made with ``dataclasses.replace`` has none.
    packed: bytes | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def type(self) -> str:
        """The stored type name, such as ``"StepCompleted"``."""
        return self.data.type


class RunStatus(StrEnum):
    """The states a run moves through, as stored in the run index.

    A ``StrEnum``: each member is also its plain string ("running", ...), so
    it compares equal to the stored value and prints as it.
    """

    RUNNING = "running"
    QUEUED = "queued"
    """Run index only: a run of a queue (``Workflow(queue=...)``) recorded and
    not yet admitted by its queue (``RunAdmitted``); its folded state says
    ``running``. See docs/queues.md."""
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SHREDDED = "shredded"
    """Its data key was destroyed (``RunShredded``), after it ended: its content
    is unreadable for good, its metadata stays. Its events say how it ended."""

    #: The statuses a run never leaves on its own (retry() leaves FAILED).
    TERMINAL: ClassVar[frozenset[str]]


RunStatus.TERMINAL = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.SHREDDED}
)


_STATUS_BY_TYPE = {
    "RunStarted": RunStatus.RUNNING,
    "RunAdmitted": RunStatus.RUNNING,
    "InterruptRaised": RunStatus.WAITING,
    "ResumeReceived": RunStatus.RUNNING,
    "TimerFired": RunStatus.RUNNING,
    "RunCompleted": RunStatus.COMPLETED,
    "RunFailed": RunStatus.FAILED,
    "RunCancelled": RunStatus.CANCELLED,
    "RunRetried": RunStatus.RUNNING,
    "RunShredded": RunStatus.SHREDDED,
}


#: A LangGraph checkpoint made by the caller (new input, update_state), not
#: by the graph's loop: the thread runs again, parked or not. A loop
#: checkpoint leaves the status as it is, because LangGraph's async
#: durability may record a checkpoint after the interrupt of its own step.
_THREAD_RESTARTS = frozenset({"input", "update", "fork"})


def status_after_event(status: str, data: EventData) -> str:
    """:func:`status_after`, plus LangGraph threads (:mod:`agentlog.langgraph`),
    whose events say they parked in their payload: a root-namespace pending
    write to ``__interrupt__`` parks the thread (waiting), one to
    ``__resume__`` (or a checkpoint that the caller, not the loop, made)
    lets it go on (running)."""
    if isinstance(data, WritesSaved) and not data.ns and data.writes is not None:
        # (writes is None when the content could not be opened here: status stays)
        channels = {write[0] for write in data.writes}
        if "__resume__" in channels:
            return RunStatus.RUNNING
        if "__interrupt__" in channels:
            return RunStatus.WAITING
        return status
    if isinstance(data, CheckpointSaved) and not data.ns:
        if data.metadata is None:  # its content could not be opened here
            return status
        restarted = data.metadata.get("source") in _THREAD_RESTARTS
        return RunStatus.RUNNING if restarted else status
    if isinstance(data, MessageSent) and data.wakes is not None:
        return RunStatus.RUNNING  # it answers the recv the run is parked on
    return status_after(status, data.type)


def status_after(status: str, event_type: str) -> str:
    """The run's status once an event of ``event_type`` is recorded.

    Every backend keeps its run index with this one function, so
    ``agentlog runs`` shows the same thing whatever the backend.
    """
    return _STATUS_BY_TYPE.get(event_type, status)


def steps_after(steps: int, event_type: str) -> int:
    """The run's step count once an event of ``event_type`` is recorded.

    A step is one step of one branch that finished (``StepCompleted``): a
    superstep that ran three branches in parallel counts three, and a step
    that failed and ran again counts once, when it finished. The run index,
    the archive's manifest and the timeline all count with this one
    function, so every place that says "N steps" means the same N; it is
    also what a run's step limit counts (``RunState.steps``).
    """
    return steps + 1 if event_type == StepCompleted.type else steps
