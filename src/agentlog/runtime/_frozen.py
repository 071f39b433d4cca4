"""Read-only views of a run's state, handed to steps as ``ctx.state``.

A step reads the state as it was when its superstep began; it changes the
state only by returning writes. A view is a ``Mapping`` or ``Sequence`` over
the live values, built lazily as a step reads deeper, so reading costs
nothing per step however large the state grows, and any attempt to change it
in place raises (``TypeError`` or ``AttributeError``, as for a tuple or a
``MappingProxyType``). ``thaw(view)`` gives a plain, mutable deep copy; a view
can also be written back as it is (the codec stores it as a list or dict).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

__all__ = ["FrozenDict", "FrozenList", "freeze", "thaw"]


def freeze(value: Any) -> Any:
    """A read-only view of ``value`` (dicts and lists at any depth); others as they are."""
    if isinstance(value, dict):
        return FrozenDict(value)
    if isinstance(value, list):
        return FrozenList(value)
    return value


def thaw(value: Any) -> Any:
    """A plain, mutable deep copy of a view (or of any value)."""
    if isinstance(value, FrozenDict | FrozenList):
        return copy.deepcopy(value._data)
    return copy.deepcopy(value)


class FrozenDict(Mapping[str, Any]):
    """A read-only view of a dict; nested dicts and lists are views too."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return freeze(self._data[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        return self._data == _plain(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._data)

    def __or__(self, other: Mapping[str, Any]) -> dict[str, Any]:
        return {**thaw(self), **other}


class FrozenList(Sequence[Any]):
    """A read-only view of a list; nested dicts and lists are views too."""

    __slots__ = ("_data",)

    def __init__(self, data: list[Any]) -> None:
        self._data = data

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> FrozenList: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return FrozenList(self._data[index])
        return freeze(self._data[index])

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[Any]:
        return map(freeze, self._data)

    def __eq__(self, other: object) -> bool:
        return self._data == _plain(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._data)

    def __add__(self, other: Sequence[Any]) -> list[Any]:
        return [*thaw(self), *other]

    def __radd__(self, other: Sequence[Any]) -> list[Any]:
        return [*other, *thaw(self)]


def _plain(value: object) -> object:
    return value._data if isinstance(value, FrozenDict | FrozenList) else value
