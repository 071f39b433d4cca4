"""The event vocabulary: the payload classes and the registry of their type names.

Each event's ``data`` is one of these frozen classes; its ``type`` is the name
stored with it, which :data:`EVENT_TYPES` maps back to the class (the codec
never imports a class named in stored bytes). Import them from
:mod:`agentlog.eventlog.events`, which re-exports every name here beside the
envelope and the run's status.

Payloads carry builtin values only (see :mod:`agentlog.eventlog.codec`).
A step records its writes as a *delta*, never the full state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, TypeAlias

from agentlog.eventlog._field_readers import FieldReader, fields_reader


class EventData:
    """Base of every payload class. ``type`` is the stored type name."""

    __slots__ = ()
    type: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        """The payload as a plain dict of its fields (shallow)."""
        reader = _TO_DICT.get(type(self))
        if reader is None:  # compiled once per class (see _field_readers)
            reader = _TO_DICT[type(self)] = fields_reader(type(self))
        return reader(self)


_TO_DICT: dict[type[EventData], FieldReader] = {}


#: One branch of a superstep: a step's name, or ``{"step": name, "input": value}``
#: for a branch started by ``Send`` (its own input, seen as ``ctx.input``).
Branch: TypeAlias = str | dict[str, Any]


@dataclass(frozen=True, slots=True)
class RunStarted(EventData):
    """A run began: what runs, with what input, under which guarantees."""

    type: ClassVar[str] = "RunStarted"
    workflow: str
    version: str
    input: Any
    durability: str
    fingerprint: str
    limits: dict[str, Any] = field(default_factory=dict)
    start: list[str] = field(default_factory=list)
    #: The reducer name of each state key ("replace", "append", "merge" or a
    #: user-registered name), so a replay without the workflow's code (the CLI)
    #: folds the same way.
    reducers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StepCompleted(EventData):
    """One step of one branch finished; ``writes`` is its delta to the state.

    Until its superstep commits, a StepCompleted is a *pending write*: after a
    crash the branch that recorded it does not run again.
    """

    type: ClassVar[str] = "StepCompleted"
    step: str
    superstep: int
    branch: int
    writes: dict[str, Any]
    goto: list[Branch] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SuperstepCommitted(EventData):
    """Every branch of a superstep finished; these steps run next."""

    type: ClassVar[str] = "SuperstepCommitted"
    superstep: int
    next: list[Branch]


@dataclass(frozen=True, slots=True)
class TaskStarted(EventData):
    """A side effect is about to run, under a stable idempotency key."""

    type: ClassVar[str] = "TaskStarted"
    key: str
    name: str
    step: str
    superstep: int
    branch: int
    call_index: int
    attempt: int = 1


@dataclass(frozen=True, slots=True)
class TaskCompleted(EventData):
    """A side effect's recorded result; it is returned, never recomputed."""

    type: ClassVar[str] = "TaskCompleted"
    key: str
    result: Any
    duration_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class TaskFailed(EventData):
    """A side effect raised; ``error`` is its type and message.

    ``retryable`` is False when the task's own retry policy gave up (the
    error is ``non_retryable``, or its ``max_attempts`` are used): a retry
    of the step then raises this failure again instead of running the task,
    until ``Runtime.retry`` gives it a fresh set of attempts.
    """

    type: ClassVar[str] = "TaskFailed"
    key: str
    error: str
    attempt: int = 1
    duration_ms: float = 0.0
    retryable: bool = True
    #: The exception as data (absent from logs written before it existed):
    #: {"type": "module.QualName", "module", "message", "args" (when builtin
    #: scalars), "causes": [{"type", "message"}, ...]}, so a caller can catch
    #: the original class (``runtime/_failures.py``).
    failure: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class InterruptRaised(EventData):
    """The run parked, waiting for a human; ``payload`` is what was asked."""

    type: ClassVar[str] = "InterruptRaised"
    step: str
    superstep: int
    branch: int
    index: int
    payload: Any
    #: The answer's shape that resume checks: a type name or {key: type name}.
    expects: Any = None
    #: When the clock answers it (UTC): a sleep's end, or an interrupt's timeout.
    due_at: datetime | None = None
    #: "input" (a human answers, through resume) or "timer" (only the clock does).
    kind: str = "input"


@dataclass(frozen=True, slots=True)
class ResumeReceived(EventData):
    """Answers to open interrupts.

    ``answers`` maps interrupt ids to their answers (one or several). Events
    recorded before interrupts had ids carry only ``value``: the answer to
    the oldest open interrupt.
    """

    type: ClassVar[str] = "ResumeReceived"
    value: Any = None
    answers: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class TimerFired(EventData):
    """The clock answered open interrupts: sleeps that ended, or interrupts
    whose timeout passed with no answer (``ids``, as in ResumeReceived)."""

    type: ClassVar[str] = "TimerFired"
    ids: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ProgressReported(EventData):
    """A step published progress (``ctx.progress(data)``) for live watchers.

    It changes neither the run's state nor its status: it is recorded like
    every event so that watchers in any process (``Runtime.stream``), replay
    and SQL see it. A step that runs again publishes its progress again.
    """

    type: ClassVar[str] = "ProgressReported"
    step: str
    superstep: int
    branch: int
    data: Any = None


@dataclass(frozen=True, slots=True)
class MessageSent(EventData):
    """A message sent into the run (``Runtime.send``) on ``topic``.

    An input from outside the run, kept in the run's inbox, in order per
    topic, until a step's ``ctx.recv(topic)`` consumes it (MessageReceived).
    ``key`` is the sender's idempotency key ("" for none): a second send
    with the same key is not recorded. ``wakes`` is the id of the open
    ``recv`` interrupt this message answers (the oldest one on its topic),
    set by the writer that records it, so that the run index and the fold
    agree that the run goes on; None when no step waits on the topic.
    """

    type: ClassVar[str] = "MessageSent"
    topic: str
    value: Any = None
    key: str = ""
    wakes: str | None = None


@dataclass(frozen=True, slots=True)
class MessageReceived(EventData):
    """A step's ``ctx.recv`` consumed the message recorded at ``seq`` (the
    oldest undelivered one of ``topic``); ``index`` is the recv's call index
    in its step, so a re-executed step gets the same message."""

    type: ClassVar[str] = "MessageReceived"
    topic: str
    seq: int
    step: str
    superstep: int
    branch: int
    index: int


@dataclass(frozen=True, slots=True)
class ValuePublished(EventData):
    """A step published ``value`` under ``key`` (``ctx.publish``), for
    ``Runtime.get_event`` and watchers; the latest value of a key wins.
    ``index`` is the publish's call index in its step: a re-executed step
    that publishes again records nothing new."""

    type: ClassVar[str] = "ValuePublished"
    key: str
    value: Any
    step: str
    superstep: int
    branch: int
    index: int


@dataclass(frozen=True, slots=True)
class StepFailed(EventData):
    """An attempt of a step raised."""

    type: ClassVar[str] = "StepFailed"
    step: str
    superstep: int
    branch: int
    attempt: int
    error: str
    retryable: bool = True


@dataclass(frozen=True, slots=True)
class RunCompleted(EventData):
    """The run reached its end."""

    type: ClassVar[str] = "RunCompleted"
    output: Any = None
    #: The output is the run's final values: the fold copies them, so the
    #: event does not store the whole state again.
    output_is_values: bool = False


@dataclass(frozen=True, slots=True)
class RunFailed(EventData):
    """The run stopped on an error it cannot get past."""

    type: ClassVar[str] = "RunFailed"
    error: str
    #: The exception that failed the run, as :attr:`TaskFailed.failure`
    #: (None in older logs, and for a failure no exception raised).
    failure: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class RunCancelled(EventData):
    """The run was cancelled (its running steps, if any, were interrupted)."""

    type: ClassVar[str] = "RunCancelled"
    reason: str = ""


@dataclass(frozen=True, slots=True)
class RunRetried(EventData):
    """A failed run was retried under the same run id (``Runtime.retry``).

    The run continues from its last committed superstep: branches whose
    writes are recorded keep them, recorded task results stay, every other
    branch gets a fresh set of attempts, and so does every failed task (of
    its own retry policy).
    """

    type: ClassVar[str] = "RunRetried"
    reason: str = ""


@dataclass(frozen=True, slots=True)
class RunMigrated(EventData):
    """A registered migration moved a parked run to new workflow code.

    This is the one event that records whole state ``values``: migrations
    are rare, and replaying one must not need the migration's code.
    """

    type: ClassVar[str] = "RunMigrated"
    from_version: str
    to_version: str
    fingerprint: str
    reducers: dict[str, str]
    values: dict[str, Any]


@dataclass(frozen=True, slots=True)
class WriterClaimed(EventData):
    """A writer took the run over at ``epoch``, fencing every older one."""

    type: ClassVar[str] = "WriterClaimed"
    epoch: int
    owner: str = ""


@dataclass(frozen=True, slots=True)
class RunAdmitted(EventData):
    """The run's queue admitted it: a worker starts driving it (once per run).

    The run index keeps its time (``admitted_at``), which a queue's rate
    limit counts (docs/queues.md). Until then the index lists the run as
    ``queued``."""

    type: ClassVar[str] = "RunAdmitted"
    queue: str


@dataclass(frozen=True, slots=True)
class RunShredded(EventData):
    """The run's data key was destroyed (``Runtime.shred``): every copy of its
    content is unreadable from now on, on purpose.

    Metadata only, so it stays readable after the shred it records: the audit
    trail of who shredded the run and when. The run index then lists it as
    ``shredded`` (a shredded run is cancelled first if it had not ended); the
    folded state keeps the status its end gave it.
    """

    type: ClassVar[str] = "RunShredded"
    #: When the key was destroyed (ISO-8601 UTC, as the key store recorded it).
    at: str
    #: Who shredded it (the runtime's owner id).
    by: str = ""


@dataclass(frozen=True, slots=True)
class RunForked(EventData):
    """This run was forked from ``origin_run_id`` at ``origin_seq`` (``Runtime.fork``).

    Recorded right after the events copied from the origin (its history up
    to ``origin_seq``), in the same append, so a fork is never on record
    without it. ``writes`` are the fork's updates to the state at that
    point, reduced like a step's writes (empty: none). It leaves the status
    as it is.
    """

    type: ClassVar[str] = "RunForked"
    origin_run_id: str
    origin_seq: int
    #: Named ``writes`` so that it is sealed like every other write (content).
    writes: dict[str, Any] = field(default_factory=dict)


#: The workflow name in a LangGraph thread's RunStarted (:mod:`agentlog.langgraph`):
#: it marks a run as a thread, which the archive keeps hot (see the archiver).
LANGGRAPH_WORKFLOW = "langgraph"


@dataclass(frozen=True, slots=True)
class CheckpointSaved(EventData):
    """A LangGraph checkpoint of a thread (the run), as a delta.

    Written by :mod:`agentlog.langgraph`. ``values`` holds only the channels
    whose version changed, each ``[channel, version, type, data, base]``:
    ``(type, data)`` is the serializer's typed encoding and ``base`` is None
    for a whole value, or the channel version this entry appends ``data`` (a
    list) to; ``type`` "empty" means the channel has no value. Channels not
    listed keep the blob of the version ``checkpoint["channel_versions"]``
    names, recorded by an earlier CheckpointSaved.
    """

    type: ClassVar[str] = "CheckpointSaved"
    ns: str
    checkpoint_id: str
    parent_id: str | None
    #: The checkpoint without its channel values: v, ts, channel_versions,
    #: versions_seen, updated_channels (builtin values).
    checkpoint: dict[str, Any]
    #: The checkpoint's metadata when it is builtin values, else {} and ``metadata_blob``.
    metadata: dict[str, Any]
    values: list[Any] = field(default_factory=list)
    #: ``[type, data]``: the metadata through the serializer, when it is not builtin.
    metadata_blob: list[Any] | None = None
    #: ``[type, data]``: keys of the checkpoint that are not builtin (pending_sends).
    extra: list[Any] | None = None


@dataclass(frozen=True, slots=True)
class WritesSaved(EventData):
    """A LangGraph task's pending writes against one checkpoint of the thread.

    ``writes`` is ``[[channel, idx, type, data], ...]``; ``idx`` is the write's
    index, or the negative index LangGraph gives special channels (errors,
    interrupts, resumes), whose writes replace an earlier one of the same task.
    """

    type: ClassVar[str] = "WritesSaved"
    ns: str
    checkpoint_id: str
    task_id: str
    task_path: str
    writes: list[Any]


@dataclass(frozen=True, slots=True)
class CheckpointsRemoved(EventData):
    """LangGraph checkpoints deleted from the thread (``delete_thread``,
    ``delete_for_runs``, ``prune``): ``checkpoints`` is ``[[ns, id], ...]``, or
    ``everything`` for the whole thread. The events stay; reads skip them."""

    type: ClassVar[str] = "CheckpointsRemoved"
    checkpoints: list[Any] = field(default_factory=list)
    everything: bool = False
    reason: str = ""


EVENT_TYPES: dict[str, type[EventData]] = {
    cls.type: cls
    for cls in (
        RunStarted,
        StepCompleted,
        SuperstepCommitted,
        TaskStarted,
        TaskCompleted,
        TaskFailed,
        InterruptRaised,
        ResumeReceived,
        TimerFired,
        ProgressReported,
        MessageSent,
        MessageReceived,
        ValuePublished,
        StepFailed,
        RunCompleted,
        RunFailed,
        RunCancelled,
        RunRetried,
        RunMigrated,
        WriterClaimed,
        RunAdmitted,
        RunShredded,
        RunForked,
        CheckpointSaved,
        WritesSaved,
        CheckpointsRemoved,
    )
}
