"""The task calls of one step execution: keys, matching against the history, retries.

:class:`TaskCalls` is what ``ctx.task`` and ``@task`` functions run through
(one per :class:`~agentlog.runtime._context.StepContext`):

* each call gets a stable idempotency key (:func:`idempotency_key`), and its
  recorded outcome is found by that key alone, so a task never gets another
  task's result;
* a re-executed step that asks, at a call, for another task than its history
  has there raises ``NondeterminismError`` before anything runs (see
  :meth:`TaskCalls.recorded` for what a call's position is);
* a call runs its effect at least once: its intent (TaskStarted) is durable
  and the writer is checked to still own the run before the effect starts;
  its result or error is recorded;
* a task's own retry policy is final for the run attempt: once it gives up,
  a later call in the same run attempt raises its recorded failure instead
  of running the task: the original class where it can be rebuilt safely
  (:func:`~agentlog.runtime._failures.rebuild`), caused by a
  ``TaskFailedError``, else that error (``Runtime.retry`` gives the task a
  fresh set of attempts);
* a failure is recorded with its type, message and causes
  (:func:`~agentlog.runtime._failures.describe`); a try over its time limit
  raises a ``TimeoutError`` that says which limit.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import hashlib
import inspect
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, cast

from agentlog.errors import (
    AgentlogError,
    NondeterminismError,
    NotSerializableError,
    WorkflowError,
)
from agentlog.eventlog.codec import pack
from agentlog.eventlog.events import TaskCompleted, TaskFailed, TaskStarted
from agentlog.projector._state import task_attempts
from agentlog.runtime._failures import describe, task_failed
from agentlog.runtime._retry import RetryPolicy
from agentlog.runtime._task_options import TaskName, TaskOptions
from agentlog.runtime._telemetry import TELEMETRY
from agentlog.runtime._writer_protocol import Writer

__all__ = ["TaskCalls", "current_idempotency_key", "idempotency_key"]

_TASK_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "agentlog_task_key", default=None
)


def current_idempotency_key() -> str:
    """The idempotency key of the task running now (inside the task's function).

    Raises:
        WorkflowError: called outside a task.
    """
    key = _TASK_KEY.get()
    if key is None:
        raise WorkflowError("current_idempotency_key() is only known inside a task's function")
    return key


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


class TaskCalls:
    """The task calls of one execution of one step (of one branch, in one superstep)."""

    def __init__(self, writer: Writer, step: str, superstep: int, branch: int) -> None:
        self._writer = writer
        self.run_id = writer.state.run_id
        self.step, self.superstep, self.branch = step, superstep, branch
        self._per_name: dict[str, int] = {}  # the next call index of each task name
        self._positions = 0
        self._in_flight = 0
        #: set when no call is in flight; made by the first call (most steps make none)
        self._settled: asyncio.Event | None = None
        #: failures whose task's retry policy gave up (see :meth:`gave_up`)
        self._gave_up: list[BaseException] = []
        #: each failed try's verdict as its TaskFailed records it (see :meth:`_attempt`)
        self._again: dict[str, bool] = {}
        #: the asyncio task running the step's body: its calls come in a fixed order
        self._owner = _current_task()
        #: every call so far returned its recorded outcome (see :meth:`recorded`)
        self._replaying = True
        #: the modules a recorded failure's class may be rebuilt from (the
        #: workflow's own; the executor sets them): see ``_failures.rebuild``
        self.modules: Collection[str] = ()

    async def run(
        self,
        name: TaskName,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        retry: RetryPolicy | None,
        time_limit: float | None,
    ) -> Any:
        """One task call: its recorded outcome, or its effect run and recorded.

        A task with a retry policy owns its retries: once the policy gives up
        (a ``non_retryable`` error, or ``max_attempts`` tries in this run
        attempt), the failure is final, and a retry or re-execution of the
        step raises :class:`TaskFailedError` instead of running it again.
        Without a policy a task is tried once per call: the step's retry
        policy is its retry policy.

        Raises:
            NondeterminismError: see :meth:`recorded`; nothing ran.
            TaskFailedError: the task's retry policy gave up earlier in this
                run attempt; nothing ran. (The recorded class itself, caused
                by this error, where it can be rebuilt safely.)
        """
        if isinstance(name, TaskOptions):  # ctx.task's limits, as @task's
            retry, time_limit, name = name.retry, name.seconds, name.name
        index = self._per_name.get(name, 0)
        self._per_name[name] = index + 1
        position, self._positions = self._positions, self._positions + 1
        key = idempotency_key(self.run_id, self.step, self.superstep, self.branch, name, index)
        recorded = self.recorded(position, name, key)
        attempt, spent = 1, 0  # spent: tries of this run attempt, counted by its policy
        if recorded is not None:
            if recorded["status"] == "completed":
                return copy.deepcopy(recorded["result"])  # the step's own copy
            if recorded.get("retryable") is False:
                failure = task_failed(recorded, (self.run_id, self.step, name, key), self.modules)
                self._gave_up.append(failure)  # final: the step is not retried for it
                raise failure
            attempt, spent = recorded["attempts"] + 1, task_attempts(recorded)
        self._in_flight += 1
        if self._settled is None:
            self._settled = asyncio.Event()
        self._settled.clear()
        try:
            while True:
                spent += 1
                try:
                    return await self._attempt(
                        name, index, key, attempt, fn, args, kwargs, time_limit, retry, spent
                    )
                except Exception as exc:
                    again = self._again.pop(key, False)  # none recorded: an agentlog error
                    if retry is None or not again:
                        if retry is not None:
                            self._gave_up.append(exc)
                        raise
                    await self._writer.backoff(retry.delay(spent))
                    attempt += 1
        finally:
            self._in_flight -= 1
            if not self._in_flight and self._settled is not None:
                self._settled.set()

    def recorded(self, position: int, name: str, key: str) -> dict[str, Any] | None:
        """What the history has for this call (found by its key), once it is sure
        that the code still asks for the task the history has there.

        A call the step makes in order (from its own asyncio task) must be the
        one recorded at its position, as long as the step still replays: every
        call before it returned its recorded outcome, so the code has seen what
        it saw then and takes the same path. A task that runs again (failed,
        or in flight at a crash) may give another outcome and lead the step
        another way, so from there on positions are not held to the history.
        Calls side by side (``ctx.gather``, ``asyncio.gather``, each in a task
        of its own) may start in another order on every execution: they are
        matched by key alone. A task never gets another task's result: the
        result is found by its own key.

        Raises:
            NondeterminismError: the history has another task at this call.
        """
        state = self._writer.state
        recorded = state.tasks.get(key)
        expected: str | None = None
        if recorded is not None and recorded.get("name") != name:
            expected = str(recorded.get("name"))  # a key collision: never its result
        elif self._replaying and _current_task() is self._owner:
            keys = state.branch_tasks.get(self.branch, ())
            if position < len(keys) and keys[position] != key:
                expected = str(state.tasks[keys[position]]["name"])
        if expected is not None:
            raise NondeterminismError(self.run_id, self.step, position, expected, name)
        if not _replays(recorded):
            self._replaying = False
        return recorded

    @property
    def position(self) -> int:
        """The position the step's next call takes among its recorded calls."""
        return self._positions

    def take_position(self) -> None:
        """Take the next position for a record that is not an effect (a patch
        marker, :mod:`agentlog.runtime._patches`), so the calls after it keep
        the positions they were recorded at."""
        self._positions += 1

    async def _failed(
        self,
        key: str,
        attempt: int,
        exc: Exception,
        started: float,
        retry: RetryPolicy | None,
        spent: int,
    ) -> None:
        """Record a try's failure: TaskFailed, with the failure as data."""
        writer = self._writer
        elapsed = (time.perf_counter() - started) * 1000
        again = retry is None or retry.retries(exc, spent)  # None: the step's policy
        failed = writer.emit(
            TaskFailed(key, _describe(exc), attempt, elapsed, again, failure=describe(exc))
        )
        await writer.flush()
        # The verdict as recorded is the one followed: the same live; in a
        # replay (agentlog verify) the history's, not the policy's second
        # opinion on an error rebuilt from its recorded text.
        self._again[key] = cast(TaskFailed, failed.data).retryable

    def gave_up(self, exc: BaseException) -> bool:
        """Whether ``exc`` is a failure a task's own retry policy gave up on:
        the executor does not retry the step for it (the task would not run)."""
        return any(exc is failure for failure in self._gave_up)

    async def settle(self) -> None:
        """Wait until no task call of this step is still running."""
        if self._in_flight and self._settled is not None:
            await self._settled.wait()

    async def _attempt(
        self,
        name: str,
        index: int,
        key: str,
        attempt: int,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        time_limit: float | None,
        retry: RetryPolicy | None,
        spent: int,
    ) -> Any:
        writer = self._writer
        writer.emit(TaskStarted(key, name, self.step, self.superstep, self.branch, index, attempt))
        await writer.sync_point()  # the intent is durable before the effect runs
        writer.check_live()  # and this writer still owns the run (again at the call)
        await writer.confirm_epoch()  # exit mode: no append above would have been fenced
        if "idempotency_key" in _parameters(fn):
            kwargs = {**kwargs, "idempotency_key": key}
        started = time.perf_counter()
        token = _TASK_KEY.set(key)
        measured = TELEMETRY.get().task(writer.state, self.step, name, key, attempt)
        try:
            async with asyncio.timeout(time_limit) as limit:
                result = await writer.run_effect(key, fn, args, kwargs)
        except Exception as exc:
            measured.failed(exc)
            if isinstance(exc, AgentlogError):
                raise
            if isinstance(exc, TimeoutError) and limit.expired():
                over = TimeoutError(f"task {name!r} took longer than {time_limit:g}s")
                await self._failed(key, attempt, over, started, retry, spent)
                raise over from exc
            await self._failed(key, attempt, exc, started, retry, spent)
            raise
        finally:
            _TASK_KEY.reset(token)
            measured.end()
        elapsed = (time.perf_counter() - started) * 1000
        try:
            pack(result, path=f"result of task {name!r}")  # before anything is recorded
        except NotSerializableError as exc:
            writer.emit(TaskFailed(key, _describe(exc), attempt, elapsed))
            await writer.flush()
            raise
        event = writer.emit(TaskCompleted(key, result, elapsed))
        await writer.flush()
        # What a replay will return (a tuple comes back a list), as the step's own copy.
        return copy.deepcopy(event.data.result)  # type: ignore[attr-defined]


def _parameters(fn: Callable[..., Any]) -> Mapping[str, inspect.Parameter]:
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop
        return None


def _replays(recorded: dict[str, Any] | None) -> bool:
    """Whether a call of this recorded task returns what it returned before:
    a recorded result, or a failure its retry policy gave up on."""
    if recorded is None:
        return False
    return recorded["status"] == "completed" or recorded.get("retryable") is False


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
