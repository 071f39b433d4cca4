"""Durations given as seconds or a :class:`~datetime.timedelta`, checked once.

:func:`timer_seconds` checks a durable timer's length (a sleep, an
interrupt's or a recv's timeout) where the step asks for it. A step's or a
task's time limit is read where it is declared
(``@wf.step(timeout=...)``, ``@task(timeout=...)``), so a wrong one (zero,
negative, not finite, not a duration) fails when the workflow is defined,
not hours later in the middle of a run.
"""

from __future__ import annotations

import math
from datetime import timedelta

from agentlog.errors import InvalidTimerError, WorkflowDefinitionError

__all__ = ["MAX_TIMER_SECONDS", "limit_seconds", "timer_seconds"]


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


#: The longest sleep or timeout agentlog accepts: beyond it is surely a unit mistake.
MAX_TIMER_SECONDS = 10 * 366 * 86400.0


def timer_seconds(value: float | timedelta, what: str, *, allow_past: bool = False) -> float:
    """A duration in seconds, checked: finite, not negative, at most ~10 years."""
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise InvalidTimerError(f"{what} must be seconds (a number) or a timedelta, got {value!r}")
    if not math.isfinite(seconds) or (seconds < 0 and not allow_past):
        raise InvalidTimerError(
            f"{what} must be a finite number of seconds >= 0, got {value!r}; nothing was recorded"
        )
    if seconds > MAX_TIMER_SECONDS:
        raise InvalidTimerError(
            f"{what} of {seconds:.0f}s is more than 10 years; check the unit (seconds, or a "
            "timedelta). Nothing was recorded."
        )
    return float(seconds)
