"""RunState: everything a run's events add up to.

A RunState is built by :func:`agentlog.projector._fold.fold` and by nothing
else: the runtime's live state and a replayed state come from the same code.
All its fields are builtin values, so it round-trips through the codec as a
snapshot.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from agentlog.eventlog.events import Branch, RunStatus

__all__ = [
    "ATTEMPTS_BEFORE_RETRY",
    "INTERNAL_FIELDS",
    "MESSAGE_ARRIVED",
    "TIMER_FIRED",
    "RunState",
    "due_timers",
    "input_interrupts",
    "is_message",
    "is_timer",
    "branch_input",
    "branch_step",
    "interrupt_id",
    "interrupt_key",
    "task_attempts",
]


def branch_step(branch: Branch) -> str:
    """The step a branch runs."""
    return branch if isinstance(branch, str) else str(branch["step"])


def branch_input(branch: Branch) -> Any:
    """The input a ``Send`` gave the branch (None for a plain step)."""
    return None if isinstance(branch, str) else branch.get("input")


def interrupt_key(superstep: int, branch: int, index: int) -> str:
    """An interrupt's id, and where its answer belongs: the n-th interrupt of a
    branch's step in a superstep, such as ``"3:1:0"``."""
    return f"{superstep}:{branch}:{index}"


#: What ``resume_values`` holds for an interrupt the clock answered (a sleep
#: that ended, or an interrupt whose timeout passed): no human answer is a dict
#: with this one key, because resume checks answers against ``expects``.
TIMER_FIRED: dict[str, str] = {"agentlog.timer": "fired"}

#: What ``resume_values`` holds for a ``recv`` that a message answered
#: (``MessageSent.wakes``): the step runs again and its recv takes the message.
MESSAGE_ARRIVED: dict[str, str] = {"agentlog.message": "arrived"}


#: The key of a task's entry (``RunState.tasks``) that holds the attempts it
#: made before the run was last retried (``Runtime.retry``).
ATTEMPTS_BEFORE_RETRY = "attempts_before_retry"


def task_attempts(task: dict[str, Any]) -> int:
    """The attempts of a recorded task that count against its retry policy:
    those made since the run last started or was retried. ``Runtime.retry``
    is a request to try again, so it gives a failed task a fresh set."""
    return int(task.get("attempts", 0)) - int(task.get(ATTEMPTS_BEFORE_RETRY, 0))


def is_timer(interrupt: dict[str, Any]) -> bool:
    """True for an open interrupt only the clock answers (a sleep)."""
    return bool(interrupt.get("kind") == "timer")


def is_message(interrupt: dict[str, Any]) -> bool:
    """True for an open interrupt a message answers (a ``recv`` with nothing
    to take); its payload is ``{"topic": ...}``."""
    return bool(interrupt.get("kind") == "message")


def input_interrupts(state: RunState) -> list[dict[str, Any]]:
    """The open interrupts a human answers (every one but sleeps and
    ``recv``s, which a message answers), oldest first."""
    return [i for i in state.interrupts if not is_timer(i) and not is_message(i)]


def due_timers(state: RunState, now: datetime) -> list[str]:
    """Ids of open interrupts whose due time passed: sleeps, and timeouts."""
    return [
        interrupt_id(i)
        for i in state.interrupts
        if i.get("due_at") is not None and i["due_at"] <= now
    ]


def interrupt_id(interrupt: dict[str, Any]) -> str:
    """The id of an open interrupt (entries from older snapshots carry none)."""
    found = interrupt.get("id")
    if isinstance(found, str):
        return found
    return interrupt_key(interrupt["superstep"], interrupt["branch"], interrupt["index"])


#: The :class:`RunState` fields the runtime keeps for its own bookkeeping (the
#: schema's fingerprint, limits and reducers, pending writes, attempts, task
#: records and their order, answers not yet consumed, the writer epoch), as
#: opposed to what the run is: ``agentlog state`` and ``diff`` show them only
#: with ``--internal``, so they never read as the user's values.
INTERNAL_FIELDS = frozenset(
    {
        "fingerprint",
        "limits",
        "reducers",
        "pending",
        "attempts",
        "branch_tasks",
        "tasks",
        "resume_values",
        "writer_epoch",
        "inbox",
        "received",
        "message_keys",
        "published_calls",
    }
)


@dataclass(slots=True)
class RunState:
    """The folded state of one run as of ``seq``.

    Treat a RunState you are handed as a value: :func:`fold` never mutates
    the state passed to it, and neither should callers.
    """

    run_id: str = ""
    #: The seq of the last event folded in.
    seq: int = 0
    status: str = ""
    workflow: str = ""
    version: str = ""
    fingerprint: str = ""
    durability: str = ""
    input: Any = None
    limits: dict[str, Any] = field(default_factory=dict)
    #: Reducer name per state key, as the run recorded them.
    reducers: dict[str, str] = field(default_factory=dict)
    #: The state built by the reducers from every committed write.
    values: dict[str, Any] = field(default_factory=dict)
    #: Steps completed across the whole run, resumes included.
    steps: int = 0
    #: The superstep that runs next (or is running), from 0.
    superstep: int = 0
    #: The steps of that superstep, one branch each, in branch order.
    next_steps: list[Branch] = field(default_factory=list)
    #: Pending writes: branch -> {"step", "writes", "goto"} of branches of the
    #: current superstep that finished before it committed.
    pending: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: Failed attempts per branch of the current superstep.
    attempts: dict[int, int] = field(default_factory=dict)
    #: Task keys per branch of the current superstep, in the order the step
    #: first called them: a re-execution that asks for another task at the
    #: same position (of the calls it makes in order) is nondeterministic.
    branch_tasks: dict[int, list[str]] = field(default_factory=dict)
    #: Side effects by idempotency key: {"name", "step", "status",
    #: "result" | "error", "attempts", "duration_ms"}; a failed one has
    #: ``"retryable": False`` once its retry policy gave up, and one the run
    #: was retried past has "attempts_before_retry" (its policy counts on from there).
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Open interrupts, oldest first: {"id", "step", "superstep", "branch",
    #: "index", "payload", "expects"}.
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    #: Answers to interrupts of the current superstep, by :func:`interrupt_key`.
    resume_values: dict[str, Any] = field(default_factory=dict)
    output: Any = None
    error: str = ""
    #: The failure that ended the run, as data (``RunFailed.failure``): its
    #: type, message and causes; None for a run that did not fail, or whose
    #: log predates it.
    failure: dict[str, Any] | None = None
    #: The writer epoch of the last WriterClaimed.
    writer_epoch: int = 0
    #: Where a forked run came from (``Runtime.fork``): {"run_id", "seq"} of
    #: the origin; None for a run that was not forked.
    forked_from: dict[str, Any] | None = None
    #: Messages sent to the run and not yet received, by topic, oldest first:
    #: {"seq" (of their MessageSent), "value"}.
    inbox: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: Messages the current superstep's recv calls took, by call id
    #: (:func:`interrupt_key`): {"topic", "seq", "value"}; a step that runs
    #: again gets the same message.
    received: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The seq of the MessageSent each idempotency key recorded.
    message_keys: dict[str, int] = field(default_factory=dict)
    #: The latest value the run published under each key (``ctx.publish``).
    published: dict[str, Any] = field(default_factory=dict)
    #: Call ids of the current superstep's publishes already recorded.
    published_calls: list[str] = field(default_factory=list)

    @property
    def is_terminal(self) -> bool:
        """True once the run completed, failed or was cancelled."""
        return self.status in RunStatus.TERMINAL

    def to_dict(self) -> dict[str, Any]:
        """Every field as builtin values (for snapshots, JSON and diffs)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunState:
        """Rebuild from :meth:`to_dict` output (msgpack turns int keys back to int)."""
        state = cls(**data)
        if state.status in RunStatus.__members__.values():
            state.status = RunStatus(state.status)  # as the fold sets it
        state.pending = {int(k): v for k, v in state.pending.items()}
        state.attempts = {int(k): v for k, v in state.attempts.items()}
        state.branch_tasks = {int(k): v for k, v in state.branch_tasks.items()}
        return state

    def copy(self) -> RunState:
        """A deep copy that shares nothing mutable with this state."""
        return copy.deepcopy(self)
