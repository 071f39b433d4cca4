"""Reading a payload's fields into a map: one generated function per payload class.

An event's payload is stored as the map of its fields, in field order
(:meth:`~agentlog.eventlog.events.EventData.to_dict`), and a sealed one as
two maps, its metadata and its content (:mod:`agentlog.eventlog._sealing`).
A comprehension over the field names with ``getattr`` per field cost more
than packing a small payload (issue 23, item 9): here each class gets a
function whose body is the dict display itself, ``{"key": d.key, "result":
d.result, ...}``, compiled once, as :mod:`dataclasses` compiles a class's
``__init__``. Only field names go into the source, and a field name is an
identifier (checked here too), so nothing from a payload's values is ever
compiled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from typing import Any

__all__ = ["FieldReader", "SplitReader", "fields_reader", "split_reader"]

#: A payload object's fields as a dict, in field order.
FieldReader = Callable[[Any], dict[str, Any]]
#: A payload object's fields as two dicts (those set apart in the second), in field order.
SplitReader = Callable[[Any], tuple[dict[str, Any], dict[str, Any]]]

_READERS: dict[type, FieldReader] = {}
_SPLIT_READERS: dict[tuple[type, frozenset[str]], SplitReader] = {}


def fields_reader(cls: type) -> FieldReader:
    """The function giving ``{name: value}`` of every field of the dataclass ``cls``."""
    reader = _READERS.get(cls)
    if reader is None:
        names = tuple(f.name for f in dataclasses.fields(cls))
        reader = _READERS[cls] = _compile(f"{_display(names)}", names)
    return reader


def split_reader(cls: type, apart: Collection[str]) -> SplitReader:
    """The function giving two maps of the dataclass ``cls``'s fields in one call:
    those not in ``apart``, and those in it, each in field order (a sealed
    payload's metadata and its content)."""
    key = (cls, frozenset(apart))
    reader = _SPLIT_READERS.get(key)
    if reader is None:
        names = tuple(f.name for f in dataclasses.fields(cls))
        clear = tuple(n for n in names if n not in apart)
        content = tuple(n for n in names if n in apart)
        reader = _SPLIT_READERS[key] = _compile(f"{_display(clear)}, {_display(content)}", names)
    return reader


def _display(names: tuple[str, ...]) -> str:
    """The source of a dict display of ``names``, read from ``data``."""
    return "{" + ", ".join(f"{name!r}: data.{name}" for name in names) + "}"


def _compile(returned: str, names: tuple[str, ...]) -> Any:
    for name in names:
        if not name.isidentifier():  # a dataclass field always is: never compile anything else
            raise ValueError(f"not a field name: {name!r}")
    namespace: dict[str, Any] = {}
    exec(f"def read(data):\n    return {returned}\n", namespace)  # field names only
    return namespace["read"]
