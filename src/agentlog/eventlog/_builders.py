"""Building decoded events, and checking their field types, at the cost of a tuple look-up.

Every payload class and :class:`~agentlog.eventlog.events.Event` is a frozen,
slotted dataclass. Its generated ``__init__`` sets each field through
``object.__setattr__`` (to get past the frozen guard) from keyword
arguments, and the codec then checked each field's type with a function
call per field: on the read path, where a long run decodes millions of
events, that cost more than unpacking the bytes (issue 23). Here an object
is made with ``object.__new__`` and each field set through its slot's own
descriptor (what ``object.__setattr__`` ends up calling, minus the name
look-up), and each value's type is tested as it is set, against the exact
builtin types msgpack decodes to: no call per field. A value that test does
not accept outright (a ``Send`` branch, a wrong type) sends the payload
through :func:`check_fields`, which decides with ``isinstance`` and names
the field. The objects are the same (equal, hashable, frozen for callers);
only building them is cheaper. The codec is the one caller.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

from agentlog.eventlog.events import SCHEMA_V, Event, EventData

__all__ = ["build_event", "build_payload", "check_fields", "is_int"]


def is_int(value: Any) -> bool:
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_branch(value: Any) -> bool:
    return isinstance(value, str) or (
        isinstance(value, dict) and isinstance(value.get("step"), str)
    )


# What each annotated field type must hold once decoded. A payload that fits
# its class's field names but not these (``writes`` that is a list, say) would
# otherwise fail deep inside the fold with an AttributeError.
_FIELD_CHECKS: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: isinstance(v, str),
    "int": is_int,
    "float": lambda v: isinstance(v, float) or is_int(v),
    "bool": lambda v: isinstance(v, bool),
    "dict[str, Any]": lambda v: isinstance(v, dict),
    "dict[str, str]": lambda v: isinstance(v, dict),
    "list[str]": _is_str_list,
    "list[Branch]": lambda v: isinstance(v, list) and all(map(_is_branch, v)),
}

# The exact types (msgpack's own, never subclasses) that pass each check
# above at a glance; True: a list whose items are all exactly str. A value
# not accepted here is not wrong yet: check_fields decides.
_ACCEPT: dict[str, tuple[tuple[type, ...], bool]] = {
    "str": ((str,), False),
    "int": ((int,), False),  # type(True) is bool, not int
    "float": ((float, int), False),
    "bool": ((bool,), False),
    "dict[str, Any]": ((dict,), False),
    "dict[str, str]": ((dict,), False),
    "list[str]": ((list,), True),
    "list[Branch]": ((list,), True),
}

_SHAPES: dict[type[EventData], tuple[tuple[str, str], ...]] = {}


def _shape(cls: type[EventData]) -> tuple[tuple[str, str], ...]:
    shape = _SHAPES.get(cls)
    if shape is None:
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        shape = _SHAPES[cls] = tuple(
            (f.name, str(f.type)) for f in fields if str(f.type) in _FIELD_CHECKS
        )
    return shape


def check_fields(data: EventData) -> str:
    """The first field whose value does not fit its declared type, or ''."""
    for name, annotation in _shape(type(data)):
        value = getattr(data, name)
        if not _FIELD_CHECKS[annotation](value):
            return f"field {name!r} holds {type(value).__name__}, not {annotation}"
    return ""


_MISSING = object()
_new = object.__new__

#: One field's step: name, slot setter, default (None: required), exact
#: types accepted at a glance (None: any value), items must be exactly str.
_Step = tuple[
    str, Callable[[Any, Any], None], Callable[[], Any] | None, tuple[type, ...] | None, bool
]


class _Plan:
    """How to build one payload class from a map of its fields."""

    __slots__ = ("known", "steps")

    def __init__(self, cls: type[EventData]) -> None:
        annotations = dict(_shape(cls))
        steps: list[_Step] = []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            fallback: Callable[[], Any] | None = None  # required
            if f.default is not dataclasses.MISSING:
                fallback = _constant(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                fallback = f.default_factory
            accept, of_str = _ACCEPT.get(annotations.get(f.name, ""), (None, False))
            steps.append((f.name, cls.__dict__[f.name].__set__, fallback, accept, of_str))
        self.steps = tuple(steps)
        self.known = frozenset(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]


def _constant(value: Any) -> Callable[[], Any]:
    return lambda: value


def _constructor_error(cls: type[EventData], fields: dict[str, Any]) -> TypeError:
    """The TypeError ``cls(**fields)`` raises (naming the unknown or missing field)."""
    try:
        cls(**fields)
    except TypeError as exc:
        return exc
    return TypeError(f"{cls.__name__} cannot be built from fields {sorted(fields)}")


_PLANS: dict[type[EventData], _Plan] = {}


def build_payload(cls: type[EventData], fields: dict[str, Any]) -> tuple[EventData, str]:
    """``cls(**fields)``, built field by field through the slots, and the
    first field whose type does not fit (as :func:`check_fields`), or ''.

    Raises:
        TypeError: as ``cls(**fields)`` would: a field the class does not
            have, or a required one missing.
    """
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _Plan(cls)
    if not fields.keys() <= plan.known:
        raise _constructor_error(cls, fields)
    data = _new(cls)
    suspect = False
    for name, setter, fallback, accept, of_str in plan.steps:
        value = fields.get(name, _MISSING)
        if value is _MISSING:
            if fallback is None:
                raise _constructor_error(cls, fields)
            value = fallback()
        elif accept is not None:
            if type(value) not in accept:
                suspect = True
            elif of_str:
                for item in value:
                    if type(item) is not str:
                        suspect = True
                        break
        setter(data, value)
    return data, (check_fields(data) if suspect else "")


_set_run, _set_seq, _set_data, _set_ts, _set_epoch, _set_v, _set_sealed, _set_bad, _set_packed = (
    Event.__dict__[name].__set__
    for name in (
        "run_id",
        "seq",
        "data",
        "ts",
        "writer_epoch",
        "schema_v",
        "sealed",
        "unreadable",
        "packed",
    )
)


def build_event(
    run_id: str,
    seq: int,
    data: EventData,
    ts: datetime,
    epoch: int,
    sealed: bytes | None,
    unreadable: Exception | None,
) -> Event:
    """``Event(run_id, seq, data, ts, epoch, sealed=..., unreadable=...)`` of a
    decoded event (its payload upcast to the current schema version)."""
    event: Event = _new(Event)
    _set_run(event, run_id)
    _set_seq(event, seq)
    _set_data(event, data)
    _set_ts(event, ts)
    _set_epoch(event, epoch)
    _set_v(event, SCHEMA_V)
    _set_sealed(event, sealed)
    _set_bad(event, unreadable)
    _set_packed(event, None)  # the stored bytes may be of an older schema: packed again
    return event
