"""fold: the one function that turns events into a RunState.

``fold(events)`` is deterministic, and ``fold(tail, fold(head)) ==
fold(head + tail)``; that is what makes snapshots and time travel correct.
Writes of a superstep's branches wait as *pending writes* and are applied,
in branch order, when the superstep commits, so parallel branches all read
the state as it was when the superstep began.

``apply`` changes the state it is given (its owner's); ``fold`` first copies
the state it starts from. Reducers may change values in place, so nothing
outside the state may hold on to its values across an ``apply``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agentlog.errors import ReplayError
from agentlog.eventlog.events import (
    CheckpointSaved,
    CheckpointsRemoved,
    Event,
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
    RunStatus,
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
from agentlog.projector._checkpoints import checkpoint_saved, checkpoints_removed, writes_saved
from agentlog.projector._reducers import REDUCERS, Reducer, replace
from agentlog.projector._state import (
    ATTEMPTS_BEFORE_RETRY,
    MESSAGE_ARRIVED,
    TIMER_FIRED,
    RunState,
    interrupt_id,
    interrupt_key,
)

__all__ = ["apply", "apply_writes", "fold"]


def apply_writes(
    values: dict[str, Any],
    reducers: dict[str, str],
    writes: dict[str, Any],
    table: Mapping[str, Reducer] = REDUCERS,
) -> None:
    """Reduce ``writes`` into ``values`` in place, by the named reducers.

    ``table`` maps reducer names to functions: a workflow's own table when its
    code is at hand (the runtime), the registered ones otherwise (a name not
    found reduces as ``replace``, which is how a CLI without the code folds).
    """
    for key, update in writes.items():
        reducer = table.get(reducers.get(key, "replace"), replace)
        values[key] = reducer(values.get(key), update)


def _run_started(state: RunState, data: RunStarted, table: Mapping[str, Reducer]) -> None:
    state.status = RunStatus.RUNNING
    state.workflow, state.version = data.workflow, data.version
    state.fingerprint, state.durability = data.fingerprint, data.durability
    state.input, state.limits = data.input, dict(data.limits)
    state.reducers = dict(data.reducers)
    state.next_steps = list(data.start)
    state.values = {}
    given = data.input if isinstance(data.input, dict) else {}
    apply_writes(state.values, state.reducers, given, table)


def _step_completed(state: RunState, data: StepCompleted) -> None:
    state.steps += 1
    state.pending[data.branch] = {"step": data.step, "writes": data.writes, "goto": data.goto}


def _superstep_committed(
    state: RunState, data: SuperstepCommitted, table: Mapping[str, Reducer]
) -> None:
    for branch in sorted(state.pending):
        apply_writes(state.values, state.reducers, state.pending[branch]["writes"], table)
    state.superstep = data.superstep + 1
    state.next_steps = list(data.next)
    state.pending, state.attempts, state.resume_values = {}, {}, {}
    state.branch_tasks = {}
    state.received, state.published_calls = {}, []


def _task_started(state: RunState, data: TaskStarted) -> None:
    previous = state.tasks.get(data.key)
    if previous is None and data.superstep == state.superstep:
        state.branch_tasks.setdefault(data.branch, []).append(data.key)
    task = {"name": data.name, "step": data.step, "status": "started", "attempts": data.attempt}
    if previous is not None and ATTEMPTS_BEFORE_RETRY in previous:
        task[ATTEMPTS_BEFORE_RETRY] = previous[ATTEMPTS_BEFORE_RETRY]  # the budget's start stays
    state.tasks[data.key] = task


def _task_completed(state: RunState, data: TaskCompleted) -> None:
    task = state.tasks.setdefault(data.key, {"name": "", "step": "", "attempts": 1})
    task.update(status="completed", result=data.result, duration_ms=data.duration_ms)


def _task_failed(state: RunState, data: TaskFailed) -> None:
    task = state.tasks.setdefault(data.key, {"name": "", "step": "", "attempts": 1})
    task.update(status="failed", error=data.error, attempts=data.attempt)
    if data.failure is not None:  # kept only when recorded (old logs fold alike)
        task["failure"] = data.failure
    else:
        task.pop("failure", None)
    if not data.retryable:  # its retry policy gave up: kept only when so (old logs fold alike)
        task["retryable"] = False


def _interrupt_raised(state: RunState, data: InterruptRaised) -> None:
    state.status = RunStatus.WAITING
    key = interrupt_key(data.superstep, data.branch, data.index)
    # Asked again (the branch re-ran while another interrupt was answered):
    # it stays one open interrupt, in its place.
    state.interrupts = [i for i in state.interrupts if interrupt_id(i) != key]
    entry = {
        "id": key,
        "step": data.step,
        "superstep": data.superstep,
        "branch": data.branch,
        "index": data.index,
        "payload": data.payload,
        "expects": data.expects,
    }
    if data.due_at is not None or data.kind != "input":  # a timer: when, and who answers
        entry.update(due_at=data.due_at, kind=data.kind)
    state.interrupts.append(entry)


def _resume_received(state: RunState, data: ResumeReceived) -> None:
    state.status = RunStatus.RUNNING
    if data.answers is None:  # recorded before interrupts had ids: the oldest one
        answers = {interrupt_id(state.interrupts[0]): data.value} if state.interrupts else {}
    else:
        answers = data.answers
    for key, value in answers.items():
        state.interrupts = [i for i in state.interrupts if interrupt_id(i) != key]
        state.resume_values[key] = value


def _timer_fired(state: RunState, data: TimerFired) -> None:
    state.status = RunStatus.RUNNING
    for key in data.ids:
        state.interrupts = [i for i in state.interrupts if interrupt_id(i) != key]
        state.resume_values[key] = dict(TIMER_FIRED)


def _message_sent(state: RunState, data: MessageSent) -> None:
    seq = state.seq + 1  # this event's
    state.inbox.setdefault(data.topic, []).append({"seq": seq, "value": data.value})
    if data.key:
        state.message_keys[data.key] = seq
    if data.wakes is not None:  # the recv it answers runs again and takes it
        state.status = RunStatus.RUNNING
        state.interrupts = [i for i in state.interrupts if interrupt_id(i) != data.wakes]
        state.resume_values[data.wakes] = dict(MESSAGE_ARRIVED)


def _message_received(state: RunState, data: MessageReceived) -> None:
    queue = state.inbox.get(data.topic, [])
    found = next((m for m in queue if m["seq"] == data.seq), None)
    if found is None:
        raise KeyError(f"no undelivered message at seq {data.seq} on topic {data.topic!r}")
    queue.remove(found)
    if not queue:
        del state.inbox[data.topic]
    key = interrupt_key(data.superstep, data.branch, data.index)
    state.received[key] = {"topic": data.topic, "seq": data.seq, "value": found["value"]}


def _value_published(state: RunState, data: ValuePublished) -> None:
    state.published[data.key] = data.value
    state.published_calls.append(interrupt_key(data.superstep, data.branch, data.index))


def _step_failed(state: RunState, data: StepFailed) -> None:
    state.attempts[data.branch] = data.attempt


def _run_completed(state: RunState, data: RunCompleted) -> None:
    output = copy.deepcopy(state.values) if data.output_is_values else data.output
    state.status, state.output, state.next_steps = RunStatus.COMPLETED, output, []


def _run_failed(state: RunState, data: RunFailed) -> None:
    state.status, state.error, state.failure = RunStatus.FAILED, data.error, data.failure


def _run_cancelled(state: RunState, data: RunCancelled) -> None:
    state.status, state.error = RunStatus.CANCELLED, data.reason


def _run_retried(state: RunState, data: RunRetried) -> None:
    # Pending writes, next steps and task results stay: only the branches
    # without recorded writes run again, each with fresh attempts, and each
    # failed task gets a fresh set of attempts of its own retry policy (the
    # attempts it made so far count no more; their numbers go on).
    state.status, state.error, state.attempts = RunStatus.RUNNING, "", {}
    state.failure = None
    for task in state.tasks.values():
        if task.get("status") == "failed":
            task.pop("retryable", None)
            task[ATTEMPTS_BEFORE_RETRY] = task.get("attempts", 0)


def _run_migrated(state: RunState, data: RunMigrated) -> None:
    state.version, state.fingerprint = data.to_version, data.fingerprint
    # A deep copy: in-place reducers (append, merge) must own every value they
    # grow, never the recorded payload's lists, or folding twice differs.
    state.reducers, state.values = dict(data.reducers), copy.deepcopy(data.values)


def _run_forked(state: RunState, data: RunForked, table: Mapping[str, Reducer]) -> None:
    # Straight into the values, even mid-superstep: branches that run again
    # read them, and pending writes of finished branches reduce on top at commit.
    apply_writes(state.values, state.reducers, data.writes, table)
    state.forked_from = {"run_id": data.origin_run_id, "seq": data.origin_seq}


def _progress_reported(state: RunState, data: ProgressReported) -> None:
    """Progress is for watchers: the state does not change (only its seq moves on)."""


def _run_shredded(state: RunState, data: RunShredded) -> None:
    """An audit record: the state does not change. (Only a process that still
    holds the run's key in its cache can fold this far; nothing else can read
    the events before it.)"""


def _writer_claimed(state: RunState, data: WriterClaimed) -> None:
    state.writer_epoch = data.epoch


_APPLY: dict[type, Callable[[RunState, Any], None]] = {
    StepCompleted: _step_completed,
    TaskStarted: _task_started,
    TaskCompleted: _task_completed,
    TaskFailed: _task_failed,
    InterruptRaised: _interrupt_raised,
    TimerFired: _timer_fired,
    ResumeReceived: _resume_received,
    StepFailed: _step_failed,
    RunCompleted: _run_completed,
    RunFailed: _run_failed,
    RunCancelled: _run_cancelled,
    RunRetried: _run_retried,
    RunMigrated: _run_migrated,
    WriterClaimed: _writer_claimed,
    RunAdmitted: lambda state, data: None,  # the run index's (docs/queues.md)
    RunShredded: _run_shredded,
    ProgressReported: _progress_reported,
    MessageSent: _message_sent,
    MessageReceived: _message_received,
    ValuePublished: _value_published,
    # A LangGraph thread (agentlog.langgraph), folded in projector/_checkpoints.py.
    CheckpointSaved: checkpoint_saved,
    WritesSaved: writes_saved,
    CheckpointsRemoved: checkpoints_removed,
}


#: The events that reduce writes: they take the reducer table.
_REDUCING: dict[type, Callable[[RunState, Any, Mapping[str, Reducer]], None]] = {
    RunStarted: _run_started,
    SuperstepCommitted: _superstep_committed,
    RunForked: _run_forked,
}


def apply(state: RunState, event: Event, reducers: Mapping[str, Reducer] | None = None) -> None:
    """Fold one event into ``state`` in place (for the state's sole owner).

    ``reducers`` is the reducer table to reduce writes with (a workflow's own);
    None means the registered ones.

    Raises:
        ReplayError: the event is not the next one of this run, or a
            reducer rejects a recorded write.
        ShreddedError, KeyStoreMissingError and the other EncryptionErrors:
            the event's content is sealed and could not be opened here.
    """
    if event.unreadable is not None:  # never fold a payload we could not read
        raise event.unreadable
    if event.seq != state.seq + 1 or (state.run_id and event.run_id != state.run_id):
        raise ReplayError(
            f"run {event.run_id!r}: event seq {event.seq} cannot follow seq {state.seq} "
            f"of run {state.run_id!r}; the history has a gap or belongs to another run."
        )
    data = event.data
    try:
        handler = _APPLY.get(type(data))
        if handler is not None:
            handler(state, data)
        else:
            _REDUCING[type(data)](state, data, reducers or REDUCERS)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        # A payload that decoded but is malformed (the codec checks field types;
        # this catches what is inside them) must name its run and seq.
        raise ReplayError(
            f"run {event.run_id!r} seq {event.seq}: cannot fold {event.type}: {exc}"
        ) from exc
    state.run_id, state.seq = event.run_id, event.seq


def fold(
    events: Iterable[Event],
    initial: RunState | None = None,
    reducers: Mapping[str, Reducer] | None = None,
) -> RunState:
    """The state after ``events``, starting from ``initial`` (not mutated)."""
    state = initial.copy() if initial is not None else RunState()
    for event in events:
        apply(state, event, reducers)
    return state
