"""What an interrupt expects as its answer: a stored schema, checked on resume.

``ctx.interrupt(payload, expects=...)`` takes a type name (``"bool"``), a
Python type (``bool``, ``list[str]``, a TypedDict, a dataclass, a pydantic
model), a ``Literal[...]``, a union (``X | None``, ``Optional[X]``,
``A | B``), or a dict of key -> either. It is turned into a schema of type
names (builtin values only, so it is stored with the InterruptRaised event and
checked by ``Runtime.resume`` in any process, without the workflow's code): a
literal is stored as ``["literal", value, ...]``, a union as ``["union",
schema, ...]``, ``None`` as the name ``"none"``.

A name or type that cannot be checked is refused when the interrupt is
raised: a typo such as ``"boolean"`` must never let any answer through.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any

from agentlog.errors import InvalidResumeValueError, WorkflowDefinitionError
from agentlog.projector._state import RunState, input_interrupts, interrupt_id

__all__ = ["TYPE_NAMES", "answers_for", "build_answer", "check_answer", "to_schema"]

#: The type names a schema may use, and the Python types each accepts.
TYPE_NAMES: dict[str, type | tuple[type, ...]] = {
    "str": str,
    "bool": bool,
    "int": int,
    "float": (int, float),
    "list": list,
    "dict": dict,
    "none": type(None),
}
_PY_TYPES = {
    str: "str",
    bool: "bool",
    int: "int",
    float: "float",
    list: "list",
    dict: "dict",
    type(None): "none",
}
#: The first item of a list schema: what the rest of the list is.
_LITERAL, _UNION = "literal", "union"
_UNIONS = (typing.Union, types.UnionType)


def to_schema(expects: Any, where: str = "expects") -> Any:
    """The stored schema of ``expects``: None, a type name, or a dict of schemas.

    Raises:
        WorkflowDefinitionError: a name or type that cannot be checked.
    """
    if expects is None or expects == "any" or expects is Any or expects is object:
        return None
    if isinstance(expects, str):
        if expects not in TYPE_NAMES:
            raise WorkflowDefinitionError(
                f"{where}={expects!r} is not a type name agentlog can check; use one of "
                f"{[*TYPE_NAMES, 'any']}, a Python type, a TypedDict, a dataclass or a dict"
            )
        return expects
    if isinstance(expects, Mapping):
        return {str(k): to_schema(v, f"{where}[{k!r}]") for k, v in expects.items()}
    origin = typing.get_origin(expects)
    if origin in (list, dict):
        return _PY_TYPES[origin]
    if origin is typing.Literal:
        return _literal_schema(typing.get_args(expects), where)
    if origin in _UNIONS:
        args = typing.get_args(expects)
        return [_UNION, *(to_schema(arg, f"{where}|{arg!r}") for arg in args)]
    if expects in _PY_TYPES:
        return _PY_TYPES[expects]
    fields = _fields(expects)
    if fields is not None:
        return {name: to_schema(hint, f"{where}.{name}") for name, hint in fields.items()}
    raise WorkflowDefinitionError(
        f"{where}: {expects!r} cannot be checked; use bool, str, int, float, list, dict, "
        "None, a Literal, a union of those, a TypedDict, a dataclass, a pydantic model, "
        "or a dict of those"
    )


def _literal_schema(values: tuple[Any, ...], where: str) -> list[Any]:
    """``["literal", value, ...]``; a literal must be a value an answer can be."""
    for value in values:
        if value is not None and type(value) not in (str, int, bool):
            raise WorkflowDefinitionError(
                f"{where}: Literal value {value!r} cannot be an answer; use str, int, bool "
                "or None values"
            )
    return [_LITERAL, *values]


def _fields(tp: Any) -> dict[str, Any] | None:
    """Field name -> annotation of a TypedDict, a dataclass or a pydantic model."""
    if typing.is_typeddict(tp) or (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
        return typing.get_type_hints(tp)
    model_fields = getattr(tp, "model_fields", None)  # pydantic v2, when installed
    if isinstance(tp, type) and isinstance(model_fields, dict):
        return {name: field.annotation for name, field in model_fields.items()}
    return None


def check_answer(schema: Any, value: Any, where: str = "value") -> None:
    """Check a resume value against a stored schema.

    Raises:
        InvalidResumeValueError: the value does not fit; the run is still waiting.
    """
    if schema is None or schema == "any":
        return
    if isinstance(schema, list) and schema and schema[0] in (_LITERAL, _UNION):
        _check_choice(schema, value, where)
        return
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            raise InvalidResumeValueError(
                f"{where} must be an object with keys {sorted(schema)}, got "
                f"{type(value).__name__}; resume again with the right shape"
            )
        for key, sub in schema.items():
            if key not in value:
                raise InvalidResumeValueError(f"{where} is missing key {key!r}; resume again")
            check_answer(sub, value[key], f"{where}[{key!r}]")
        return
    wanted = TYPE_NAMES.get(str(schema))
    if wanted is None:  # recorded before unknown names were refused
        raise InvalidResumeValueError(
            f"the interrupt expects {schema!r}, which is not a type agentlog can check, so "
            "no answer is accepted; cancel the run, or fix the workflow and start again"
        )
    # bool is an int in Python, but True is not an answer to "int"
    ok = isinstance(value, bool) if wanted is bool else isinstance(value, wanted)
    if not ok or (wanted is not bool and isinstance(value, bool)):
        raise InvalidResumeValueError(
            f"{where} must be {schema}, got {type(value).__name__} {value!r}; resume again "
            "with the right shape (the run is still waiting)"
        )


def _check_choice(schema: list[Any], value: Any, where: str) -> None:
    """Check ``value`` against a literal or a union schema.

    Raises:
        InvalidResumeValueError: the value is none of the choices.
    """
    kind, choices = schema[0], schema[1:]
    if kind == _LITERAL:
        # True == 1 in Python, but True is not the answer Literal[1] asks for
        if any(value == c and type(value) is type(c) for c in choices):
            return
        wanted = " or ".join(repr(c) for c in choices)
    else:
        for choice in choices:
            try:
                check_answer(choice, value, where)
            except InvalidResumeValueError:
                continue
            return
        wanted = " or ".join(_describe(c) for c in choices)
    raise InvalidResumeValueError(
        f"{where} must be {wanted}, got {type(value).__name__} {value!r}; resume again with "
        "one of those (the run is still waiting)"
    )


def _describe(schema: Any) -> str:
    if isinstance(schema, list) and schema and schema[0] == _LITERAL:
        return " or ".join(repr(c) for c in schema[1:])
    if isinstance(schema, list) and schema and schema[0] == _UNION:
        return " or ".join(_describe(c) for c in schema[1:])
    if isinstance(schema, dict):
        return f"an object with keys {sorted(schema)}"
    return "any value" if schema is None else str(schema)


def build_answer(expects: Any, value: Any) -> Any:
    """The answer as the step asked for it: a dataclass or pydantic model is
    built, also as one member of a union (the first whose shape fits)."""
    if typing.get_origin(expects) in _UNIONS:
        for member in typing.get_args(expects):
            try:
                check_answer(to_schema(member), value)
            except InvalidResumeValueError:
                continue
            return build_answer(member, value)
        return value
    if isinstance(expects, type) and dataclasses.is_dataclass(expects):
        return expects(**value)
    validate = getattr(expects, "model_validate", None)
    if isinstance(expects, type) and callable(validate):
        return validate(value)
    return value


def answers_for(state: RunState, value: Any, answers: Mapping[str, Any] | None) -> dict[str, Any]:
    """Interrupt id -> answer, checked against the open interrupts' ``expects``.

    ``value`` answers the one open interrupt, or is itself ``{id: answer}``;
    ``answers`` names them explicitly.

    Raises:
        InvalidResumeValueError: an answer that does not fit, an id that is not
            open, or a plain value while several interrupts are open.
    """
    open_ = {interrupt_id(i): i for i in input_interrupts(state)}  # a sleep is not asked
    if answers is None and isinstance(value, Mapping) and value and set(value) <= set(open_):
        answers = value  # resume(run_id, {interrupt_id: value})
    if answers is None:
        if len(open_) != 1:
            raise InvalidResumeValueError(
                f"run {state.run_id!r} has {len(open_)} open interrupts ({sorted(open_)}); "
                "answer them by id: resume(run_id, {id: value}) (see pending())"
            )
        answers = {next(iter(open_)): value}
    chosen = dict(answers)
    for key, answer in chosen.items():
        if key not in open_:
            raise InvalidResumeValueError(
                f"run {state.run_id!r} has no open interrupt {key!r}; open: {sorted(open_)}"
            )
        where = "value" if len(open_) == 1 else f"answer to {key!r}"
        check_answer(open_[key].get("expects"), answer, where)
    return chosen
