"""The classes a state schema is made of, read from its type annotations.

A graph's state holds instances of the classes its schema names, and those
of their fields, at any depth: a pydantic state whose ``items`` is a
``list[Item]`` stores Item objects too. So allowing a schema class allows
every pydantic model, dataclass and enum its annotations reach. The walk
reads the classes the application's code hands over and their annotations,
never stored bytes, and imports nothing: it is how an allow-list given by
code covers the whole schema (LangGraph's own strict mode does the same
walk, and passes the saver the result only when LANGGRAPH_STRICT_MSGPACK
is set).
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from collections.abc import Iterable
from enum import Enum
from typing import Any

from pydantic import BaseModel
from typing_extensions import is_typeddict

__all__ = ["schema_classes"]

#: Type forms that carry no class of their own to allow.
_NOTHING: tuple[Any, ...] = (Any, None, type(None), typing.Literal)


def schema_classes(roots: Iterable[type]) -> set[tuple[str, str]]:
    """(module, name) of each root class and of every class its fields reach.

    Pydantic models, dataclasses and enums are collected; TypedDicts,
    unions, ``Annotated``, generics (``list[Item]``, ``dict[str, Item]``)
    and NewTypes are looked through. Annotations that do not resolve are
    skipped: they name nothing this walk can vouch for.
    """
    found: set[tuple[str, str]] = set()
    seen: set[int] = set()
    for root in roots:
        found.add((root.__module__, root.__name__))
        _walk_fields(root, found, seen)
    return found


def _walk(typ: Any, found: set[tuple[str, str]], seen: set[int]) -> None:
    if id(typ) in seen or any(typ is nothing for nothing in _NOTHING):
        return
    seen.add(id(typ))
    origin = typing.get_origin(typ)
    if origin is typing.Literal:
        return
    if origin is not None or isinstance(typ, types.UnionType):
        for arg in typing.get_args(typ):  # Union, Annotated (its type first), list[...], ...
            _walk(arg, found, seen)
        return
    if hasattr(typ, "__supertype__"):  # a NewType
        _walk(typ.__supertype__, found, seen)
        return
    if not isinstance(typ, type):
        return
    if is_typeddict(typ):
        _walk_fields(typ, found, seen)
    elif issubclass(typ, BaseModel) or dataclasses.is_dataclass(typ) or issubclass(typ, Enum):
        found.add((typ.__module__, typ.__name__))
        _walk_fields(typ, found, seen)


def _walk_fields(typ: type, found: set[tuple[str, str]], seen: set[int]) -> None:
    for field_type in _field_types(typ):
        _walk(field_type, found, seen)


def _field_types(typ: type) -> list[Any]:
    """The annotations of ``typ``'s fields, resolved where they can be."""
    module = sys.modules.get(typ.__module__)
    try:
        hints = typing.get_type_hints(
            typ, globalns=vars(module) if module else None, include_extras=True
        )
        return list(hints.values())
    except Exception:  # a forward reference that does not resolve: use what is there
        pass
    if issubclass(typ, BaseModel):
        return [f.annotation for f in typ.model_fields.values() if f.annotation is not None]
    if dataclasses.is_dataclass(typ):
        return [f.type for f in dataclasses.fields(typ) if not isinstance(f.type, str)]
    return []
