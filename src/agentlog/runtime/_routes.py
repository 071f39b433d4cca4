"""Where a run goes after a step: :class:`Next`, made by :func:`goto` and
:func:`end`, whose targets are steps or :class:`Send` branches.

Beneath :mod:`agentlog.runtime._workflow` (which re-exports them) and
:mod:`agentlog.runtime._graph`, which recognises them in a step's code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from agentlog.errors import InvalidRouteError

__all__ = ["Next", "Send", "Target", "end", "goto"]

#: Where a step can go: a step's name, or the step function itself.
Target: TypeAlias = str | Callable[..., Any]


@dataclass(frozen=True, slots=True, init=False)
class Send:
    """A branch with its own input: ``goto(*(Send("tool", call=c) for c in calls))``.

    Each Send runs its step as one more parallel branch of the next superstep,
    which sees the keyword arguments as ``ctx.input`` (a dict). Several Sends
    may name the same step: that is dynamic fan-out over a list. Like any
    branch, its writes are recorded as pending writes when it finishes, and
    only the branches that did not finish run again after a crash or failure.
    """

    step: Target
    input: dict[str, Any]

    def __init__(self, step: Target, /, **input: Any) -> None:
        object.__setattr__(self, "step", step)
        object.__setattr__(self, "input", input)


@dataclass(frozen=True, slots=True)
class Next:
    """What a step wrote and where the run goes next (no steps: the end)."""

    writes: Mapping[str, Any] = field(default_factory=dict)
    goto: tuple[Target | Send, ...] = ()


def goto(*steps: Target | Send, **writes: Any) -> Next:
    """Write ``writes``, then run ``steps`` (several run in parallel).

    A target is a step's name, its function, or a :class:`Send` (a branch
    with its own input). To end the run, use :func:`end`.

    Raises:
        InvalidRouteError: no step was named.
    """
    if not steps:
        raise InvalidRouteError("goto() needs at least one step; to end the run, return end(...)")
    return Next(writes, tuple(steps))


def end(**writes: Any) -> Next:
    """Write ``writes``, then end the run."""
    return Next(writes, ())
