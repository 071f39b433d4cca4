"""Time limits given as seconds or a :class:`~datetime.timedelta`, checked once.

A step's or a task's time limit is read where it is declared
(``@wf.step(timeout=...)``, ``@task(timeout=...)``), so a wrong one (zero,
negative, not finite, not a duration) fails when the workflow is defined,
not hours later in the middle of a run.
"""

from __future__ import annotations

import math
from datetime import timedelta

from agentlog.errors import WorkflowDefinitionError

__all__ = ["limit_seconds"]


def limit_seconds(value: float | timedelta | None, what: str) -> float | None:
    """``value`` in seconds (None stays None: no limit).

    Args:
        what: what the limit is for, in the error ("a task timeout").

    Raises:
        WorkflowDefinitionError: not a number of seconds or a timedelta, or
            not a finite duration above zero.
    """
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise WorkflowDefinitionError(
            f"{what} must be seconds (a number) or a datetime.timedelta, got {value!r}"
        )
    if not math.isfinite(seconds) or seconds <= 0:
        raise WorkflowDefinitionError(
            f"{what} must be a finite duration above zero (seconds or a timedelta), got "
            f"{value!r}; leave it out for no limit"
        )
    return float(seconds)
