"""Versioning in code: ``ctx.patched(id)`` and ``ctx.deprecate_patch(id)``.

A long-running run and a new one take different paths through changed code
without a workflow version bump (Temporal's ``patched``)::

    if ctx.patched("fix-42"):
        receipt = await charge_v2(order)      # runs that reach here under this code
    else:
        receipt = await charge(order)         # runs recorded before the patch

The answer is made once per run and point, and kept in the run's history, so
every later execution of the step (a resume, a retry, ``agentlog verify``)
gives the same one:

* a marker is recorded: True. The marker is a task of its own, named
  ``agentlog.patched:<id>`` with the result True, at the call's position
  among the step's task calls (so it replays, forks, archives and verifies
  like any task, and needs no event type of its own);
* no marker, but the step's history goes on past this point: the run
  passed here under code without the patch, so False. Past this point means
  a task call recorded at this position or later, an interrupt or a sleep
  recorded at this one's index or later, or (in a replay) any other event the
  step recorded that the code has not reached;
* neither: the run reaches this point for the first time under this code,
  so the marker is recorded and True is returned.

The marker is written in order with everything after it: a crash before it
is durable loses what followed it too, so the step runs again and asks again
with the same history, and gets the same answer.

Once no run that could take the old path is open, replace ``if
ctx.patched(id): new() else: old()`` by ``ctx.deprecate_patch(id); new()``:
it accepts the marker where the history has one and records none. When no
run with a marker is open either, remove the call.
"""

from __future__ import annotations

from agentlog.errors import WorkflowDefinitionError
from agentlog.eventlog.events import EventData, TaskCompleted, TaskFailed, TaskStarted
from agentlog.projector._state import interrupt_key
from agentlog.runtime._task_calls import TaskCalls, idempotency_key
from agentlog.runtime._writer_protocol import Writer

__all__ = ["PATCH_TASK", "Patches"]

#: A patch marker is recorded as a completed task of this name plus the patch id.
PATCH_TASK = "agentlog.patched:"


class Patches:
    """The patch markers of one execution of one step (of one branch, in one superstep)."""

    def __init__(self, writer: Writer, calls: TaskCalls) -> None:
        self._writer, self._calls = writer, calls
        #: id -> the answer this execution gave (asked again: the same, no new position)
        self._answers: dict[str, bool] = {}

    def patched(self, patch_id: str, interrupts: int) -> bool:
        """Whether this run takes the patched path here (see the module).

        Args:
            patch_id: the patch's id, stable across deploys.
            interrupts: the index the step's next interrupt or sleep would get.

        Raises:
            WorkflowDefinitionError: an empty or non-string id.
        """
        if patch_id in self._answers:
            return self._answers[patch_id]
        key = self._key(patch_id)
        if key in self._writer.state.tasks:
            self._calls.take_position()  # the marker's, as when it was recorded
            answer = True
        elif self._ahead_is_marker(key):
            self._record(patch_id, key)  # a replay reaches the recorded marker
            answer = True
        elif self._history_goes_on(interrupts):
            answer = False
        else:
            self._record(patch_id, key)
            answer = True
        self._answers[patch_id] = answer
        return answer

    def deprecate(self, patch_id: str) -> None:
        """Accept the marker of ``patch_id`` where the history has one; record none."""
        if patch_id in self._answers:
            return
        key = self._key(patch_id)
        if key in self._writer.state.tasks:
            self._calls.take_position()
        elif self._ahead_is_marker(key):
            self._record(patch_id, key)
        self._answers[patch_id] = True

    def _key(self, patch_id: str) -> str:
        if not isinstance(patch_id, str) or not patch_id:
            raise WorkflowDefinitionError(
                f"a patch id must be a non-empty string, got {patch_id!r}; give each "
                'change its own stable id, such as ctx.patched("fix-42")'
            )
        calls = self._calls
        name = PATCH_TASK + patch_id
        return idempotency_key(calls.run_id, calls.step, calls.superstep, calls.branch, name, 0)

    def _ahead(self) -> list[EventData]:
        calls = self._calls
        return self._writer.upcoming(calls.superstep, calls.branch)

    def _ahead_is_marker(self, key: str) -> bool:
        return any(isinstance(d, TaskStarted) and d.key == key for d in self._ahead())

    def _history_goes_on(self, interrupts: int) -> bool:
        """Whether the step's history has something recorded past this point."""
        calls, state = self._calls, self._writer.state
        if len(state.branch_tasks.get(calls.branch, ())) > calls.position:
            return True  # a task call recorded at this position or later
        key = interrupt_key(calls.superstep, calls.branch, interrupts)
        if key in state.resume_values or any(i.get("id") == key for i in state.interrupts):
            return True  # an interrupt or a sleep at this index or later
        known = state.tasks
        return any(  # a replay: the step recorded more that the code has not reached
            not isinstance(d, TaskCompleted | TaskFailed)
            and not (isinstance(d, TaskStarted) and d.key in known)
            for d in self._ahead()
        )

    def _record(self, patch_id: str, key: str) -> None:
        calls, writer = self._calls, self._writer
        calls.take_position()
        name = PATCH_TASK + patch_id
        writer.emit(TaskStarted(key, name, calls.step, calls.superstep, calls.branch, 0, 1))
        writer.emit(TaskCompleted(key, True, 0.0))
