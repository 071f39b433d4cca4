"""The ``@task`` decorator: a side effect with its own name, retry policy and timeout.

::

    @task(retry=RetryPolicy(max_attempts=5), timeout=30)
    async def charge(customer: str, cents: int) -> str:
        return await payments.charge(customer, cents, key=current_idempotency_key())

    @wf.step
    async def pay(ctx: StepContext) -> Next:
        receipt = await charge(ctx.state["customer"], 500)   # durable, typed
        return end(receipt=receipt)

Called inside a step, a task runs like ``ctx.task``: its intent is durable
before it starts, it runs at least once with a stable idempotency key, and
its result is recorded, so a replay returns it without running it again.
Each try that fails is recorded; the task's own retry policy decides whether
to try again before the step's policy sees the error. That decision is
final for the run attempt: once the policy gives up (a ``non_retryable``
error, or ``max_attempts`` tries), a retry of the step raises
``TaskFailedError`` instead of running the task again, so a step retry never
multiplies a task's attempts; ``Runtime.retry`` gives it a fresh set. A task
without ``retry=`` is tried once per step attempt: the step's policy retries
it. The signature is kept, so a type checker checks the arguments and the
result at every call, and the call is a ``Coroutine``: a forgotten ``await``
is reported (mypy's ``unused-coroutine``, pyright's ``reportUnusedCoroutine``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any, ParamSpec, TypeVar, overload

from agentlog.errors import WorkflowDefinitionError
from agentlog.runtime._context import current_context
from agentlog.runtime._durations import limit_seconds
from agentlog.runtime._retry import RetryPolicy

__all__ = ["task"]

P = ParamSpec("P")
R = TypeVar("R")


@overload
def task(fn: Callable[P, Coroutine[Any, Any, R]], /) -> Callable[P, Coroutine[Any, Any, R]]: ...


@overload
def task(fn: Callable[P, R], /) -> Callable[P, Coroutine[Any, Any, R]]: ...


@overload
def task(
    *,
    name: str | None = None,
    retry: RetryPolicy | None = None,
    timeout: float | timedelta | None = None,
) -> _TaskDecorator: ...


def task(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    retry: RetryPolicy | None = None,
    timeout: float | timedelta | None = None,
) -> Any:
    """Make ``fn`` a durable task (usable bare or with options).

    Args:
        name: the recorded task name (default: the function's qualified name).
            Keep it stable: it is part of the idempotency key.
        retry: how often to try the effect before the step sees the error,
            in one run attempt: a step retry does not run it again once this
            policy gave up. Default: once per step attempt (the step's retry
            policy decides whether it runs again).
        timeout: how long one try may take (seconds or a timedelta); a try
            that takes longer fails with a ``TimeoutError`` that names the
            task and the limit (a sync function's thread cannot be stopped
            and finishes in the background).
    """
    seconds = limit_seconds(timeout, "a task timeout")

    def decorate(func: Callable[..., Any]) -> Callable[..., Coroutine[Any, Any, Any]]:
        task_name = name or getattr(func, "__qualname__", "") or getattr(func, "__name__", "")
        if not task_name:
            raise WorkflowDefinitionError(f"{func!r} has no name; pass @task(name=...)")

        @functools.wraps(func)
        async def call(*args: Any, **kwargs: Any) -> Any:
            ctx = current_context()
            return await ctx.run_task(
                task_name, func, args, kwargs, retry=retry, time_limit=seconds
            )

        return call

    return decorate(fn) if fn is not None else _TaskDecorator(decorate)


class _TaskDecorator:
    """What ``@task(...)`` with options returns: keeps the signature for type checkers."""

    def __init__(
        self, decorate: Callable[[Callable[..., Any]], Callable[..., Coroutine[Any, Any, Any]]]
    ):
        self._decorate = decorate

    @overload
    def __call__(
        self, fn: Callable[P, Coroutine[Any, Any, R]], /
    ) -> Callable[P, Coroutine[Any, Any, R]]: ...

    @overload
    def __call__(self, fn: Callable[P, R], /) -> Callable[P, Coroutine[Any, Any, R]]: ...

    def __call__(self, fn: Callable[..., Any], /) -> Any:
        return self._decorate(fn)
