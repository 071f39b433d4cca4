"""How the runtime tells an async callable from a sync one.

Its own module because both the task calls (:mod:`~agentlog.runtime._task_calls`)
and the writer that calls a task's function
(:meth:`~agentlog.runtime._writer.RunWriter.call_effect`) need it, and the
writer must not import the task calls, which hold a writer.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["is_async_callable"]


def is_async_callable(fn: Callable[..., Any]) -> bool:
    """An async function, a partial of one, or an object with an async ``__call__``."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - the method itself, not callable()
    )
