"""A task call's limits for an inline ``ctx.task`` call: its name, retry policy and timeout.

::

    fetch = TaskOptions("fetch", timeout=timedelta(seconds=30), retry=RetryPolicy(max_attempts=3))

    @wf.step
    async def read(ctx: StepContext) -> Next:
        page = await ctx.task(fetch, http_get, ctx.state["url"])
        return end(page=page)

They are what ``@task(name=, retry=, timeout=)`` takes, for a call that is not
a decorated function. They are passed in the name's place, not as keywords:
``ctx.task`` passes every keyword on to the function (an HTTP client's own
``timeout=`` stays the client's), and a type checker checks those arguments
against the function's signature.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from agentlog.errors import WorkflowDefinitionError
from agentlog.runtime._durations import limit_seconds
from agentlog.runtime._retry import RetryPolicy

__all__ = ["TaskName", "TaskOptions"]


@dataclass(frozen=True, slots=True)
class TaskOptions:
    """The name and limits of a ``ctx.task`` call (see ``@task`` for their meaning).

    Attributes:
        name: the recorded task name; keep it stable (it is part of the
            idempotency key).
        retry: how often to try the effect in one run attempt before the step
            sees the error (None: once per step attempt; the step's policy
            retries it).
        timeout: how long one try may take (seconds or a timedelta); a try
            that takes longer fails with a ``TimeoutError`` that names the
            task and the limit (a sync function's thread finishes in the
            background).

    Raises:
        WorkflowDefinitionError: an empty name, or a timeout that is not a
            finite duration above zero (at construction, before any run).
    """

    name: str
    retry: RetryPolicy | None = None
    timeout: float | timedelta | None = None
    #: ``timeout`` in seconds (None: no limit).
    seconds: float | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise WorkflowDefinitionError(
                f"a task needs a name (non-empty text), got {self.name!r}"
            )
        object.__setattr__(self, "seconds", limit_seconds(self.timeout, "a task timeout"))


#: What ``ctx.task`` takes as its first argument: a name, or a name with limits.
TaskName = str | TaskOptions
