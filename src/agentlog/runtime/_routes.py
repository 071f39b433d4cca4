"""Where a run goes after a step: :class:`Next`, made by :func:`goto` and
:func:`end`, whose targets are steps or :class:`Send` branches.

Beneath :mod:`agentlog.runtime._workflow` (which re-exports them) and
:mod:`agentlog.runtime._graph`, which recognises them in a step's code.

Keyword arguments cannot be typed against a state, so each has a typed form
as well, checked by mypy and pyright against a TypedDict: ``end(W(...))`` or
``end({...})`` in a step that returns ``Next[W]``, ``goto(step,
writes=W(...))``, and ``Send.to(step, I(...))`` for a step whose context is
``StepContext[S, I]``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, overload

from typing_extensions import TypeVar

from agentlog.errors import InvalidRouteError

if TYPE_CHECKING:
    from agentlog.runtime._context import StepContext

__all__ = ["Next", "Send", "Target", "end", "goto"]

#: Where a step can go: a step's name, or the step function itself.
Target: TypeAlias = str | Callable[..., Any]
#: The writes of a Next: a TypedDict of some of the state's keys, or any mapping.
W = TypeVar("W", bound=Mapping[str, Any], default=Mapping[str, Any])
SI = TypeVar("SI")


@dataclass(frozen=True, slots=True, init=False)
class Send:
    """A branch with its own input: ``goto(*(Send("tool", call=c) for c in calls))``.

    Each Send runs its step as one more parallel branch of the next superstep,
    which sees the keyword arguments as ``ctx.input`` (a dict). Several Sends
    may name the same step: that is dynamic fan-out over a list. Like any
    branch, its writes are recorded as pending writes when it finishes, and
    only the branches that did not finish run again after a crash or failure.

    ``Send.to(tool, ToolCall(call=c))`` is the typed form: the input is
    checked against the step's input type (``StepContext[S, ToolCall]``).
    """

    step: Target
    input: dict[str, Any]

    def __init__(self, step: Target, /, **input: Any) -> None:
        object.__setattr__(self, "step", step)
        object.__setattr__(self, "input", input)

    @classmethod
    def to(cls, step: Callable[[StepContext[Any, SI]], Awaitable[Any]], input: SI, /) -> Send:
        """A Send whose input a type checker checks against ``step``'s input type.

        Raises:
            InvalidRouteError: ``input`` is not a dict (a TypedDict is one).
        """
        if not isinstance(input, dict):
            raise InvalidRouteError(
                f"Send.to({getattr(step, '__name__', step)!r}, ...) takes the input as a dict "
                f"(a TypedDict), got {type(input).__name__}"
            )
        return cls(step, **input)


@dataclass(frozen=True, slots=True)
class Next(Generic[W]):
    """What a step wrote and where the run goes next (no steps: the end).

    ``Next[W]``, with ``W`` a TypedDict of some of the state's keys, is a
    step's typed return: ``end`` and ``goto`` then check the writes' keys.
    """

    writes: W = field(default_factory=dict)  # type: ignore[assignment]
    goto: tuple[Target | Send, ...] = ()


def goto(*steps: Target | Send, writes: W | None = None, **more: Any) -> Next[W]:
    """Write ``writes`` and ``more``, then run ``steps`` (several run in parallel).

    A target is a step's name, its function, or a :class:`Send` (a branch
    with its own input). To end the run, use :func:`end`. ``writes=`` is the
    typed form: a TypedDict (or a dict in a step that returns ``Next[W]``)
    whose keys a type checker checks; ``more`` are further keyword writes.
    A state key named ``writes`` is written through ``writes={"writes": v}``.

    Raises:
        InvalidRouteError: no step was named, or ``writes`` is not a mapping.
    """
    if not steps:
        raise InvalidRouteError("goto() needs at least one step; to end the run, return end(...)")
    return Next(_merged(writes, more), tuple(steps))


@overload
def end(writes: W, /) -> Next[W]: ...


@overload
def end(**writes: Any) -> Next: ...


def end(writes: Mapping[str, Any] | None = None, /, **more: Any) -> Next[Any]:
    """Write ``writes`` (keyword arguments, or one mapping: the typed form), then
    end the run.

    Raises:
        InvalidRouteError: the positional argument is not a mapping.
    """
    return Next(_merged(writes, more), ())


def _merged(writes: Mapping[str, Any] | None, more: dict[str, Any]) -> Any:
    if writes is None:
        return more
    if not isinstance(writes, Mapping):
        raise InvalidRouteError(
            f"writes must be a mapping of state keys to values (a TypedDict), got "
            f"{type(writes).__name__}"
        )
    return {**writes, **more}
