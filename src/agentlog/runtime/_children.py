"""Child runs: a step starts another workflow's run and waits for it durably.

A child's run id is derived from the parent's call (run id, step, superstep,
branch, call index), and its start is a task of the parent's step, so a
re-executed step finds the child it started before instead of starting a
second (and a start is idempotent on the run id besides). The child's
``RunStarted`` records the link in ``limits["parent"]``: the parent's run id
and the call that started it.

Waiting uses the messages machinery: the child's result is a message to the
parent on the topic :func:`child_topic`, sent (with the idempotency key
``child:<id>``, so it is stored once) by whoever drives the child when it
ends. A step waiting on a child that has not ended parks like a ``recv``
(no process held); the message wakes it. A step that finds the child ended
but no message yet records the message itself, and the park carries a timer
(:meth:`ChildHost.recheck_seconds`) that runs the step again, so a wake
lost to a crash between the child's end and its message is made up for.

Only the process that drives a step can start or look up a child: the
driver puts its :class:`ChildHost` in :data:`CHILD_HOST` for the run's task.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from agentlog.errors import RunCancelledError, WorkflowError
from agentlog.eventlog.events import MessageSent, RunStatus, utcnow
from agentlog.projector._state import RunState, interrupt_key
from agentlog.runtime._failures import run_failed
from agentlog.runtime._inbox import take_message
from agentlog.runtime._interrupted import Interrupted
from agentlog.runtime._writer_protocol import Writer

__all__ = [
    "CHILD_HOST",
    "CHILD_TASK",
    "ChildCalls",
    "ChildHandle",
    "ChildHost",
    "child_key",
    "child_outcome",
    "child_topic",
    "parent_of",
    "wait_child",
]

#: The name prefix of the task that records a child's start in its parent.
CHILD_TASK = "start child "
#: The prefix of the topic a child's outcome is sent to its parent on.
_TOPIC = "agentlog.child:"


class ChildHost(Protocol):
    """What a step needs from the runtime that drives it to start and read children."""

    async def start_child(
        self, workflow: Any, run_id: str, input: Any, parent: Mapping[str, Any]
    ) -> None:
        """Record the child run (idempotent on ``run_id``) for a driver to run."""

    async def read_state(self, run_id: str) -> RunState:
        """The child run's state as recorded."""

    def modules(self) -> set[str]:
        """Where a child's failure class may be rebuilt from (the registered workflows')."""

    async def run_ended(self, state: RunState) -> None:
        """A run the driver drove ended: wake its parent, cancel its children."""

    def recheck_seconds(self) -> float:
        """How long a parent waits on a child before a timer checks it again."""


#: The host of the step running in this task (set by the driver per run).
CHILD_HOST: contextvars.ContextVar[ChildHost | None] = contextvars.ContextVar(
    "agentlog_child_host", default=None
)


def child_topic(child_id: str) -> str:
    """The topic a child's outcome is sent to its parent on."""
    return f"{_TOPIC}{child_id}"


def child_key(child_id: str) -> str:
    """The idempotency key of a child's outcome message (stored once)."""
    return f"child:{child_id}"


def parent_of(state: RunState) -> Mapping[str, Any] | None:
    """The link to the parent's call of a child run (None: not a child)."""
    parent = state.limits.get("parent")
    return parent if isinstance(parent, Mapping) else None


def child_outcome(state: RunState) -> dict[str, Any]:
    """An ended child's outcome as the message its parent gets."""
    return {
        "status": state.status,
        "values": state.values,
        "error": state.error,
        "failure": state.failure,
    }


def host() -> ChildHost:
    """The child host of the step running in this task.

    Raises:
        WorkflowError: no runtime drives this step (a replay check); nothing started.
    """
    found = CHILD_HOST.get()
    if found is None:
        raise WorkflowError(
            "a child run can only be started or awaited by a step a Runtime drives; "
            "this step runs without one (a replay check), so nothing was started"
        )
    return found


def _result(child_id: str, outcome: Mapping[str, Any]) -> Any:
    """The child's final values, or its failure raised as the parent sees it."""
    status = outcome.get("status")
    if status == RunStatus.COMPLETED:
        return outcome.get("values")
    if status == RunStatus.CANCELLED:
        raise RunCancelledError(child_id, str(outcome.get("error", "")))
    raise run_failed(child_id, str(outcome.get("error", "")), outcome.get("failure"), _modules())


def _modules() -> set[str]:
    found = CHILD_HOST.get()
    return found.modules() if found is not None else set()


async def _ended_outcome(
    writer: Writer, superstep: int, branch: int, child_id: str
) -> dict[str, Any] | None:
    """The outcome of ``child_id`` if it ended (None: it has not). Without a
    runtime (a replay check), what the history recorded next for this branch."""
    found = CHILD_HOST.get()
    if found is None:
        topic = child_topic(child_id)
        for data in writer.upcoming(superstep, branch):
            if isinstance(data, MessageSent) and data.topic == topic:
                return dict(data.value)
        return None
    state = await found.read_state(child_id)
    return child_outcome(state) if state.is_terminal else None


async def wait_child(writer: Writer, where: tuple[str, int, int, int], child_id: str) -> Any:
    """The result of ``child_id`` for the wait call ``where`` (step, superstep,
    branch, index) of a step, or park the run until the child ends.

    Raises:
        Interrupted: the child has not ended; the run parks (kind "message").
        The child's failure, rebuilt (see :func:`~agentlog.runtime._failures.run_failed`),
        or RunCancelledError for a cancelled child.
    """
    step, superstep, branch, index = where
    topic = child_topic(child_id)
    found, outcome = take_message(writer, topic, step, superstep, branch, index)
    if not found and child_key(child_id) not in writer.state.message_keys:
        ended = await _ended_outcome(writer, superstep, branch, child_id)
        if ended is not None:
            writer.emit(MessageSent(topic, ended, child_key(child_id)))
            found, outcome = take_message(writer, topic, step, superstep, branch, index)
    if found:
        return _result(child_id, outcome)
    # A timer re-checks the child, in case its wake was lost to a crash.
    running = CHILD_HOST.get()
    due = None if running is None else utcnow() + timedelta(seconds=running.recheck_seconds())
    raise Interrupted(index, {"topic": topic, "child": child_id}, None, due, "message")


@dataclass(frozen=True, slots=True)
class ChildHandle:
    """A child run started by ``ctx.start_child``: ``await handle.result()``
    in the step waits for it durably (the run parks until the child ends).
    A later step waits with ``ctx.wait_child(run_id)``.

    Attributes:
        run_id: the child's run id.
    """

    run_id: str
    _calls: ChildCalls

    async def result(self) -> Any:
        """The child's final values, or its failure raised (see ``ctx.child``)."""
        return await self._calls.wait_child(self.run_id)


class ChildCalls:
    """``StepContext``'s child-run calls (a base class, so the context stays small)."""

    _writer: Writer
    run_id: str
    step: str
    superstep: int
    branch: int
    _child_calls: int = 0

    def _next_interrupt(self) -> tuple[int, str]:
        raise NotImplementedError  # StepContext's

    async def run_task(
        self, name: str, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        raise NotImplementedError  # StepContext's

    async def start_child(
        self, workflow: Any, input: Any = None, *, run_id: str | None = None
    ) -> ChildHandle:
        """Start a child run of ``workflow`` and return its handle without waiting.

        The child's id is ``run_id``, else derived from this call (the parent's
        run id, step, superstep, branch and call index), and its start is
        recorded as a task of this step: a step that runs again finds the same
        child, and starts no second one. A worker (or this process) drives it.

        Raises:
            WorkflowError: no runtime drives this step (a replay check).
            The errors of ``Runtime.start`` (a bad input, a run id of another
            workflow), recorded as the start task's failure.
        """
        index = self._child_calls
        self._child_calls = index + 1
        child_id = run_id or _derived_id(self.run_id, self.step, self.superstep, self.branch, index)
        where = interrupt_key(self.superstep, self.branch, index)
        parent = {"run_id": self.run_id, "step": self.step, "call": where}
        await self.run_task(
            f"{CHILD_TASK}{child_id}", _start, (workflow, child_id, input, parent), {}
        )
        return ChildHandle(child_id, self)

    async def child(self, workflow: Any, input: Any = None, *, run_id: str | None = None) -> Any:
        """Start a child run (see :meth:`start_child`) and wait for its result.

        Returns:
            The child's final values (a dict).

        Raises:
            The child's failure: its own class rebuilt where it can be (see
            ``Runtime.result``), else RunFailedError with ``.error_type``;
            RunCancelledError if the child was cancelled.
        """
        handle = await self.start_child(workflow, input, run_id=run_id)
        return await handle.result()

    async def wait_child(self, run_id: str) -> Any:
        """Wait durably for the child run ``run_id`` (started by this run) to end.

        The run parks until the child ends (no process held); the child's end
        wakes it, and the step runs again from its start.

        Returns and raises:
            As :meth:`child`.
        """
        index, _ = self._next_interrupt()
        where = (self.step, self.superstep, self.branch, index)
        return await wait_child(self._writer, where, run_id)


async def _start(workflow: Any, run_id: str, input: Any, parent: dict[str, Any]) -> str:
    await host().start_child(workflow, run_id, input, parent)
    return run_id


def _derived_id(run_id: str, step: str, superstep: int, branch: int, index: int) -> str:
    """A child's run id derived from the parent's call, stable across re-execution."""
    return f"{run_id}/{step}/{interrupt_key(superstep, branch, index)}"
