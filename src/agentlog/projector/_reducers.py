"""Reducers: how a step's write to a state key combines with what is there.

A step records only its delta. Each key of a workflow's state has a reducer
``(current, update) -> new``; folding the recorded deltas through the
reducers rebuilds the state. Reducers must be deterministic: replay calls
them again, years later, and must get the same state.

A reducer may change ``current`` in place and return it: the fold owns every
value in the state it builds (it copies its starting state), which is what
keeps a step of a long run O(delta) rather than O(state). It must never keep
or change ``update``, which is the recorded event's own payload.

Built in:

* ``replace``: the update replaces the value (the default);
* ``append``: the update (a list, or one item) is appended to a list;
* ``merge``: the update (a dict) is merged into a dict, key by key.

User-defined reducers are registered by name with :func:`register_reducer`,
because a run records its reducers by name (the CLI replays runs without the
workflow's code, and falls back to ``replace`` for a name it does not know).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from agentlog.errors import ConfigError

__all__ = [
    "REDUCERS",
    "Reducer",
    "append",
    "function_name",
    "merge",
    "reducer_name",
    "register_reducer",
    "replace",
]


class Reducer(Protocol):
    """``(current, update) -> new``; ``current`` is None for a new key."""

    def __call__(self, current: Any, update: Any, /) -> Any: ...


def replace(current: Any, update: Any) -> Any:
    """The update wins."""
    return update


def append(current: Any, update: Any) -> Any:
    """Append a list of items (or one item) to the list (in place)."""
    items = current if isinstance(current, list) else []
    if isinstance(update, list):
        items.extend(update)
    else:
        items.append(update)
    return items


def merge(current: Any, update: Any) -> Any:
    """Shallow-merge a dict into the dict (in place)."""
    if not isinstance(update, dict):
        raise TypeError(f"merge reducer needs a dict update, got {type(update).__name__}")
    merged = current if isinstance(current, dict) else {}
    merged.update(update)
    return merged


#: Reducers by the name a run records.
REDUCERS: dict[str, Reducer] = {"replace": replace, "append": append, "merge": merge}


def register_reducer(name: str, fn: Callable[[Any, Any], Any]) -> None:
    """Make a user-defined reducer known under ``name``.

    Raises:
        ConfigError: the name is taken by a different function.
    """
    existing = REDUCERS.get(name)
    if existing is not None and existing is not fn:
        raise ConfigError(f"reducer name {name!r} is already registered to another function")
    REDUCERS[name] = fn


def function_name(fn: Callable[[Any, Any], Any]) -> str:
    """The name a run records for a reducer function (its module and qualified
    name), without registering it anywhere."""
    for name, known in REDUCERS.items():
        if known is fn:
            return name
    return f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}"


def reducer_name(fn: Callable[[Any, Any], Any]) -> str:
    """The registered name of a reducer, registering it by ``__qualname__`` if new."""
    for name, known in REDUCERS.items():
        if known is fn:
            return name
    name = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}"
    register_reducer(name, fn)
    return name
