"""StepContext: what a step sees, and its two durable calls.

* ``await ctx.task(name, fn, *args)`` runs a side effect at least once, with
  a stable idempotency key, and records its result; on resume, replay or a
  retry of the step, the recorded result is returned and ``fn`` is not
  called again. If the process died after TaskStarted but before the result
  was recorded, ``fn`` runs again with the same idempotency key, so the
  external service can drop the duplicate. Before ``fn`` starts, its intent
  (TaskStarted) is durable and this writer is checked to still own the run.
* ``ctx.interrupt(payload)`` parks the run for a human. On resume the step
  runs again from its start; this time ``interrupt`` returns the answer. Code
  before it runs again too, which is why side effects belong in ``ctx.task``.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from agentlog.errors import AgentlogError, NotSerializableError
from agentlog.eventlog.codec import pack
from agentlog.eventlog.events import InterruptRaised, TaskCompleted, TaskFailed, TaskStarted
from agentlog.projector.state import interrupt_key

if TYPE_CHECKING:
    from agentlog.runtime.writer import RunWriter

__all__ = ["Interrupted", "StepContext", "idempotency_key"]


def idempotency_key(
    run_id: str, step: str, superstep: int, branch: int, name: str, call_index: int
) -> str:
    """The stable key of one task call: the same on every re-execution.

    Derived from (run_id, step, superstep, branch, task name, call index); the
    superstep is part of the step's identity so that a step that runs again
    later in a loop gets fresh keys.
    """
    raw = f"{run_id}\x1f{step}\x1f{superstep}\x1f{branch}\x1f{name}\x1f{call_index}"
    return hashlib.blake2b(raw.encode(), digest_size=16).hexdigest()


class Interrupted(BaseException):
    """Raised by :meth:`StepContext.interrupt` to park the run.

    A BaseException, so that a step's ``except Exception`` does not swallow it.
    """

    def __init__(self, index: int, payload: Any, expects: Any) -> None:
        super().__init__(index, payload)
        self.index, self.payload, self.expects = index, payload, expects


class StepContext:
    """Handed to each step call.

    Attributes:
        run_id: the run's id.
        step: this step's name.
        superstep: the superstep it runs in (0, 1, ...).
        branch: its branch index inside the superstep.
        attempt: 1 on the first try, 2 on the first retry, ...
        state: the run's state values as of the superstep's start (read-only).
    """

    def __init__(
        self,
        writer: RunWriter,
        *,
        step: str,
        superstep: int,
        branch: int,
        attempt: int,
        state: Mapping[str, Any],
    ) -> None:
        self._writer = writer
        self.run_id = writer.state.run_id
        self.step, self.superstep, self.branch, self.attempt = step, superstep, branch, attempt
        self.state: Mapping[str, Any] = MappingProxyType(state)
        self._task_calls: dict[str, int] = {}
        self._interrupts = 0

    async def task(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run the side effect ``fn(*args, **kwargs)``; record and return its result.

        The effect runs at least once: a crash between the effect and its
        recorded result runs it again with the same idempotency key.

        ``fn`` may be sync (run in a worker thread) or async. If it takes a
        parameter named ``idempotency_key``, the stable key is passed in.

        Returns:
            ``fn``'s result, or the recorded result on re-execution.

        Raises:
            NotSerializableError: the result cannot be recorded (recorded as
                TaskFailed); the step is not retried, the run stays
                resumable, and with fixed code the task runs again, same key.
            FencedError, LeaseExpiredError: this writer no longer owns the
                run; the effect was not started.
            Whatever ``fn`` raised (recorded as TaskFailed first).
        """
        index = self._task_calls.get(name, 0)
        self._task_calls[name] = index + 1
        key = idempotency_key(self.run_id, self.step, self.superstep, self.branch, name, index)
        recorded = self._writer.state.tasks.get(key)
        if recorded is not None and recorded["status"] == "completed":
            return recorded["result"]
        attempt = recorded["attempts"] + 1 if recorded is not None else 1
        self._writer.emit(
            TaskStarted(key, name, self.step, self.superstep, self.branch, index, attempt)
        )
        await self._writer.sync_point()  # the intent is durable before the effect runs
        self._writer.check_live()  # and this writer still owns the run
        if "idempotency_key" in _parameters(fn):
            kwargs["idempotency_key"] = key
        started = time.perf_counter()
        try:
            if inspect.iscoroutinefunction(fn):
                result = await fn(*args, **kwargs)
            else:
                result = await asyncio.to_thread(fn, *args, **kwargs)
        except Exception as exc:
            if not isinstance(exc, AgentlogError):
                elapsed = (time.perf_counter() - started) * 1000
                self._writer.emit(TaskFailed(key, _describe(exc), attempt, elapsed))
                await self._writer.flush()
            raise
        elapsed = (time.perf_counter() - started) * 1000
        try:
            pack(result, path=f"result of task {name!r}")  # before anything is recorded
        except NotSerializableError as exc:
            self._writer.emit(TaskFailed(key, _describe(exc), attempt, elapsed))
            await self._writer.flush()
            raise
        self._writer.emit(TaskCompleted(key, result, elapsed))
        await self._writer.flush()
        return result

    def interrupt(self, payload: Any = None, *, expects: Any = None) -> Any:
        """Park the run for a human; on resume, return their answer.

        Args:
            payload: what to show the human (builtin values).
            expects: the answer's shape, checked by ``Runtime.resume``: a type
                name ("str", "bool", "int", "float", "list", "dict") or a dict
                of key -> type name.
        """
        index = self._interrupts
        self._interrupts += 1
        key = interrupt_key(self.superstep, self.branch, index)
        answers = self._writer.state.resume_values
        if key in answers:
            return answers[key]
        pack([payload, expects], path="interrupt payload")
        raise Interrupted(index, payload, expects)

    def _record_interrupt(self, interrupted: Interrupted) -> None:
        self._writer.emit(
            InterruptRaised(
                self.step,
                self.superstep,
                self.branch,
                interrupted.index,
                interrupted.payload,
                interrupted.expects,
            )
        )


def _parameters(fn: Callable[..., Any]) -> Mapping[str, inspect.Parameter]:
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
