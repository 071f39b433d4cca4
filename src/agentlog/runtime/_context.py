"""StepContext: what a step sees, and its durable calls.

* ``await ctx.task(name, fn, *args)`` runs a side effect at least once, with
  a stable idempotency key, and records its result; on resume, replay or a
  retry of the step, the recorded result is returned and ``fn`` is not
  called again. If the process died after TaskStarted but before the result
  was recorded, ``fn`` runs again with the same idempotency key, so the
  external service can drop the duplicate. Before ``fn`` starts, its intent
  (TaskStarted) is durable and this writer is checked to still own the run.
  Functions decorated with :func:`agentlog.runtime.task` do the same when
  called inside a step, with their own retry policy and timeout. A recorded
  result is found by the call's own key, and a re-executed step that asks
  for another task than the history has at that call raises
  ``NondeterminismError`` (see :meth:`TaskCalls.recorded
  <agentlog.runtime._task_calls.TaskCalls.recorded>`).
* ``await ctx.gather(*calls)`` runs tasks side by side as one structured
  group: every call finishes and is recorded (or is cancelled) before the
  step goes on, fails, retries or parks.
* ``ctx.interrupt(payload)`` parks the run for a human. On resume the step
  runs again from its start; this time ``interrupt`` returns the answer. Code
  before it runs again too, which is why side effects belong in tasks.

No task outlives its step: the executor waits for every task call still in
flight (say, a sibling in a plain ``asyncio.gather`` whose partner failed)
to finish and be recorded before it records the step's failure, retries it
or parks the run, so no effect runs again only because a sibling failed.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, Literal, ParamSpec, overload

from typing_extensions import TypeForm, TypeVar

from agentlog.errors import (
    InterruptTimeoutError,
    InvalidTimerError,
    WorkflowDefinitionError,
    WorkflowError,
)
from agentlog.eventlog.codec import pack
from agentlog.eventlog.events import InterruptRaised, ProgressReported, utcnow
from agentlog.projector._state import TIMER_FIRED, interrupt_key
from agentlog.runtime._awaited import result_is_awaited
from agentlog.runtime._children import ChildCalls
from agentlog.runtime._durations import timer_seconds
from agentlog.runtime._expects import build_answer, to_schema
from agentlog.runtime._frozen import FrozenDict
from agentlog.runtime._inbox import check_name, publish_value, take_message
from agentlog.runtime._interrupted import Interrupted
from agentlog.runtime._patches import Patches
from agentlog.runtime._retry import RetryPolicy
from agentlog.runtime._task_calls import TaskCalls
from agentlog.runtime._task_options import TaskName
from agentlog.runtime._writer_protocol import Writer

__all__ = [
    "Interrupted",
    "StepContext",
    "current_context",
]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
D = TypeVar("D")
S = TypeVar("S", default=dict[str, Any])
#: What a ``Send`` gives the step (``ctx.input``): a TypedDict for ``Send.to``.
SI = TypeVar("SI", default=Any)

_CONTEXT: contextvars.ContextVar[StepContext[Any] | None] = contextvars.ContextVar(
    "agentlog_step_context", default=None
)


def current_context() -> StepContext[Any]:
    """The StepContext of the step running in this task.

    Raises:
        WorkflowError: called outside a step.
    """
    ctx = _CONTEXT.get()
    if ctx is None:
        raise WorkflowError(
            "a durable task was called outside a step; call it from a workflow step "
            "(or call the undecorated function directly)"
        )
    return ctx


#: ``interrupt(default=...)`` was not given.
_NO_DEFAULT: Any = object()


class StepContext(ChildCalls, Generic[S, SI]):
    """Handed to each step call; ``S`` is the workflow's state type, ``SI`` the
    step's input type (what ``Send.to`` checks).

    Attributes:
        run_id: the run's id.
        step: this step's name.
        superstep: the superstep it runs in (0, 1, ...).
        branch: its branch index inside the superstep.
        attempt: 1 on the first try, 2 on the first retry, ...
        state: the run's state values as of the superstep's start (read-only).
        input: what a ``Send`` gave this branch (a dict), or None.
    """

    def __init__(
        self,
        writer: Writer,
        *,
        step: str,
        superstep: int,
        branch: int,
        attempt: int,
        state: Mapping[str, Any],
        input: Any = None,
    ) -> None:
        self._writer = writer
        self.input: SI = input
        self.run_id = writer.state.run_id
        self.step, self.superstep, self.branch, self.attempt = step, superstep, branch, attempt
        #: read-only at every depth: a step changes the state only by its writes
        view = FrozenDict(state if isinstance(state, dict) else dict(state))
        self.state: S = view  # type: ignore[assignment]  # a read-only view, typed as S
        self._calls = TaskCalls(writer, step, superstep, branch)
        self._patches = Patches(writer, self._calls)
        self._interrupts = 0
        self._publishes = 0

    @overload
    async def task(
        self,
        name: TaskName,
        fn: Callable[P, Coroutine[Any, Any, R]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R: ...

    @overload
    async def task(
        self, name: TaskName, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs
    ) -> R: ...

    async def task(self, name: TaskName, fn: Callable[..., Any], /, *args: Any, **kw: Any) -> Any:
        """Run the side effect ``fn(*args, **kwargs)``; record and return its result.

        The effect runs at least once: a crash between the effect and its
        recorded result runs it again with the same idempotency key. ``fn``
        may be sync (run in a worker thread) or async. It learns its key
        from :func:`current_idempotency_key`, or from a parameter named
        ``idempotency_key``, which is filled in. ``name`` may be TaskOptions (retry, timeout).

        Returns:
            ``fn``'s result, or the recorded result on re-execution.

        Raises:
            NotSerializableError: the result cannot be recorded (recorded as
                TaskFailed); the step is not retried, the run stays
                resumable, and with fixed code the task runs again, same key.
            FencedError, LeaseExpiredError: this writer no longer owns the
                run; the effect was not started.
            NondeterminismError: the step is re-executed and its history has
                another task at this call; nothing ran.
            Whatever ``fn`` raised (recorded as TaskFailed first); TimeoutError.
        """
        return await self.run_task(name, fn, args, kw)

    async def run_task(
        self,
        name: TaskName,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        retry: RetryPolicy | None = None,
        time_limit: float | None = None,
    ) -> Any:
        """:meth:`task` with a retry policy and a time limit per try (for ``@task``).

        A task with a retry policy owns its retries: once the policy gives up
        (a ``non_retryable`` error, or ``max_attempts`` tries in this run
        attempt), the failure is final, and a retry or re-execution of the
        step raises :class:`TaskFailedError` instead of running it again.
        Without a policy a task is tried once per step attempt: the step's
        retry policy is its retry policy.

        Raises:
            TaskFailedError: the task's retry policy gave up earlier in this
                run attempt; nothing ran.
        """
        return await self._calls.run(name, fn, args, kwargs, retry, time_limit)

    def _task_gave_up(self, exc: BaseException) -> bool:
        """Whether ``exc`` is a failure a task's own retry policy gave up on:
        the executor does not retry the step for it (the task would not run)."""
        return self._calls.gave_up(exc)

    async def gather(self, *calls: Awaitable[T]) -> list[T]:
        """Run task calls side by side; return their results in order.

        Unlike a plain ``asyncio.gather``, every call finishes (and its result
        or error is recorded) before this returns or raises, so a failure or
        an interrupt in one call never leaves a sibling running, and no
        effect runs again only because a sibling failed.

        Raises:
            The first error among the calls (an interrupt only if no call failed).
        """
        tasks = [asyncio.ensure_future(call) for call in calls]
        try:
            await asyncio.wait(tasks)
        except BaseException:  # the step itself is cancelled: so are its calls
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        errors = [t.exception() for t in tasks if not t.cancelled() and t.exception()]
        failure = next((e for e in errors if not isinstance(e, Interrupted)), None)
        if failure is not None or errors:
            raise failure or errors[0]  # type: ignore[misc]
        return [t.result() for t in tasks]

    # The answer's type follows ``expects`` for mypy and pyright (a type form:
    # a class, a TypedDict, ``Literal[...]``, ``X | None``), and no overload
    # returns something awaitable, so ``await ctx.interrupt(...)`` is reported.
    @overload
    def interrupt(
        self,
        payload: Any = None,
        *,
        expects: Literal["any"] | None = None,
        timeout: float | timedelta | None = None,
        default: object = ...,
    ) -> object: ...

    @overload
    def interrupt(
        self,
        payload: Any = None,
        *,
        expects: Mapping[str, Any],
        timeout: float | timedelta | None = None,
        default: object = ...,
    ) -> dict[str, Any]: ...

    @overload
    def interrupt(
        self,
        payload: Any = None,
        *,
        expects: TypeForm[T],
        timeout: float | timedelta | None = None,
    ) -> T: ...

    @overload
    def interrupt(
        self,
        payload: Any = None,
        *,
        expects: TypeForm[T],
        timeout: float | timedelta,
        default: D,
    ) -> T | D: ...

    def interrupt(
        self,
        payload: Any = None,
        *,
        expects: Any = None,
        timeout: float | timedelta | None = None,
        default: Any = _NO_DEFAULT,
    ) -> Any:
        """Park the run for a human; on resume, return their answer.

        Not a coroutine: call it without ``await`` (the answer's type is not
        awaitable, so type checkers report an ``await``; untyped code that
        awaits it fails at once with ``WorkflowDefinitionError``, before the
        run parks, rather than after the human answered).

        Args:
            payload: what to show the human (builtin values).
            expects: the answer's shape, checked by ``Runtime.resume`` before
                anything is recorded: a type name ("str", "bool", "int",
                "float", "list", "dict", "none", "any"), a Python type
                (``bool``, a TypedDict, a dataclass, a pydantic model), a
                ``Literal[...]``, a union (``X | None``, ``A | B``), or a dict
                of key -> either. A dataclass or pydantic model is built from
                the answer. The return type follows it for type checkers.
            timeout: how long to wait for the answer (seconds or a timedelta),
                counted from when the interrupt was first raised. A worker
                answers it for the clock once it passes.
            default: returned when ``timeout`` passed with no answer; without
                it, :class:`InterruptTimeoutError` is raised in the step.

        Raises:
            WorkflowDefinitionError: ``expects`` names a type that cannot be
                checked (a typo such as "boolean" must not accept any answer),
                or the call is awaited; nothing is recorded.
            InterruptTimeoutError: the timeout passed with no answer and no
                ``default`` was given.
            InvalidTimerError: a negative, non-finite or absurd ``timeout``.
        """
        if result_is_awaited():
            raise WorkflowDefinitionError(
                f"step {self.step!r} awaits ctx.interrupt(...), which is not a coroutine: "
                "remove the await (answer = ctx.interrupt(...)); nothing was recorded"
            )
        schema = to_schema(expects)
        index, key = self._next_interrupt()
        answers = self._writer.state.resume_values
        if key in answers:
            answer = answers[key]
            if timeout is not None and answer == TIMER_FIRED:
                if default is _NO_DEFAULT:
                    raise InterruptTimeoutError(self.run_id, key, payload)
                return default
            return build_answer(expects, answer)
        due = None if timeout is None else self._due(key, timer_seconds(timeout, "timeout"))
        pack([payload, schema], path="interrupt payload")
        raise Interrupted(index, payload, schema, due)

    async def sleep(self, duration: float | timedelta) -> None:
        """Sleep durably: the run parks with no process until ``duration`` passed.

        The timer is an event. A worker that owns the run fires it at its due
        time (after any number of crashes and restarts), and the step runs
        again from its start; this time ``sleep`` returns at once, and tasks
        before it return their recorded results.

        Raises:
            InvalidTimerError: a negative, non-finite or absurd duration.
        """
        seconds = timer_seconds(duration, "sleep duration")
        index, key = self._next_interrupt()
        if key in self._writer.state.resume_values:
            return
        raise Interrupted(index, None, None, self._due(key, seconds), "timer")

    async def sleep_until(self, when: datetime) -> None:
        """Sleep durably until ``when`` (a timezone-aware datetime); see :meth:`sleep`.

        Raises:
            InvalidTimerError: a naive datetime, or one absurdly far away.
        """
        if not isinstance(when, datetime) or when.tzinfo is None:
            raise InvalidTimerError(
                f"sleep_until needs a timezone-aware datetime, got {when!r}; "
                "use datetime.now(UTC) + timedelta(...)"
            )
        index, key = self._next_interrupt()
        if key in self._writer.state.resume_values:
            return
        timer_seconds((when - utcnow()).total_seconds(), "sleep_until", allow_past=True)
        due = self._open_due(key) or when.astimezone(UTC)
        raise Interrupted(index, None, None, due, "timer")

    def _next_interrupt(self) -> tuple[int, str]:
        index = self._interrupts
        self._interrupts += 1
        return index, interrupt_key(self.superstep, self.branch, index)

    def _open_due(self, key: str) -> datetime | None:
        """The due time an open interrupt was raised with (kept when raised again)."""
        for entry in self._writer.state.interrupts:
            if entry.get("id") == key and entry.get("due_at") is not None:
                due: datetime = entry["due_at"]
                return due
        return None

    def _due(self, key: str, seconds: float) -> datetime:
        return self._open_due(key) or utcnow() + timedelta(seconds=seconds)

    async def _settle(self) -> None:
        """Wait until no task call of this step is still running."""
        await self._calls.settle()

    def _record_interrupt(self, interrupted: Interrupted) -> None:
        self._writer.emit(
            InterruptRaised(
                self.step,
                self.superstep,
                self.branch,
                interrupted.index,
                interrupted.payload,
                interrupted.expects,
                interrupted.due_at,
                interrupted.kind,
            )
        )

    def _enter(self) -> contextvars.Token[StepContext[Any] | None]:
        return _CONTEXT.set(self)

    @staticmethod
    def _exit(token: contextvars.Token[StepContext[Any] | None]) -> None:
        _CONTEXT.reset(token)

    async def progress(self, data: Any) -> None:
        """Publish progress to the run's watchers (``Runtime.stream``).

        ``data`` is recorded as a ProgressReported event, which changes
        neither the state nor the status, and is written as the run's
        durability mode writes: ``sync`` returns once it is durable,
        ``async`` hands it to the background writer, ``exit`` holds it until
        the run ends or parks (so watchers see it only then). Awaited, so the
        update reaches watchers while the step still works rather than only
        at the step's end. A step that runs again publishes its progress again.

        Raises:
            NotSerializableError: ``data`` holds a value that cannot be stored;
                nothing is recorded.
        """
        writer = self._writer
        writer.emit(ProgressReported(self.step, self.superstep, self.branch, data))
        await writer.flush()

    def patched(self, patch_id: str) -> bool:
        """Versioning in code: True for runs that reach this point under code
        that has the patch, False for runs whose history already went past it
        without (see :mod:`agentlog.runtime._patches`).

        The answer is recorded (a marker, when True) and is the same on every
        later execution of the step, in a resume and in ``agentlog verify``.

        Raises:
            WorkflowDefinitionError: an empty or non-string id.
        """
        return self._patches.patched(patch_id, self._interrupts)

    def deprecate_patch(self, patch_id: str) -> None:
        """The patch's old path is gone: accept its marker where a run has one.

        Raises:
            WorkflowDefinitionError: an empty or non-string id.
        """
        self._patches.deprecate(patch_id)

    async def recv(self, topic: str, timeout: float | timedelta | None = None) -> Any:  # noqa: ASYNC109
        """Take the next message sent to this run on ``topic`` (``Runtime.send``).

        Messages are kept in the run's log, in order per topic, from whenever
        they were sent (before the run asked too), and each is received once:
        the delivery is recorded, so a step that runs again gets the same
        message and a later ``recv`` the next one. With none waiting, the
        run parks durably (no process held) until one is sent, and the step
        runs again from its start (side effects belong in tasks).

        Args:
            topic: the topic (non-empty text, at most 256 characters).
            timeout: how long to wait (seconds or a timedelta), counted from
                when this recv first parked; a worker fires it, like a sleep.

        Returns:
            The message's value; None if ``timeout`` passed with no message.

        Raises:
            InvalidMessageError: a topic that is not short text.
            InvalidTimerError: a negative, non-finite or absurd ``timeout``.
        """
        check_name("topic", topic)
        seconds = None if timeout is None else timer_seconds(timeout, "recv timeout")
        index, key = self._next_interrupt()
        found, value = take_message(
            self._writer, topic, self.step, self.superstep, self.branch, index
        )
        if found:
            return value
        if seconds is not None and self._writer.state.resume_values.get(key) == TIMER_FIRED:
            return None
        due = None if seconds is None else self._due(key, seconds)
        raise Interrupted(index, {"topic": topic}, None, due, "message")

    async def publish(self, key: str, value: Any) -> None:
        """Publish ``value`` under ``key`` for ``Runtime.get_event`` and watchers
        (``Runtime.stream``); the latest value of a key wins.

        Recorded as a ValuePublished event and written as the run's durability
        mode writes (see :meth:`progress`). Each publish call of a step is
        recorded once: a step that runs again (a retry, a resume) publishes
        nothing new at a call it made before.

        Raises:
            InvalidMessageError: a key that is not short text.
            NotSerializableError: ``value`` cannot be stored; nothing is recorded.
        """
        check_name("key", key)
        index = self._publishes
        self._publishes += 1
        step, superstep, branch = self.step, self.superstep, self.branch
        if publish_value(self._writer, key, value, step, superstep, branch, index):
            await self._writer.flush()
