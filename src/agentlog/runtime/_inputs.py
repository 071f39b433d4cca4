"""A run's input type: ``Workflow(input=TypedDict)``, checked when a run starts.

The type checkers check ``Runtime.start(wf, input=...)`` against it; these
checks hold the same line for code that is not type-checked (or a dict built
at run time): a required key missing, or a key the input type does not have,
is refused before anything is recorded.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any, get_origin, get_type_hints, is_typeddict

import typing_extensions

from agentlog.errors import ConfigError, WorkflowDefinitionError

__all__ = ["InputKeys", "check_input", "input_keys"]

#: An input type's keys, and those of them a run must be started with.
InputKeys = tuple[frozenset[str], frozenset[str]]
_NOT_REQUIRED = (typing.NotRequired, typing_extensions.NotRequired)
_REQUIRED = (typing.Required, typing_extensions.Required)


def input_keys(input_type: Any, workflow: str, state_keys: Mapping[str, str]) -> InputKeys | None:
    """The keys and required keys of ``Workflow(input=...)`` (None: not given).

    Required keys are read from the annotations (``Required``,
    ``NotRequired``, the class's ``total``), as ``__required_keys__`` misses
    them on Python 3.11 when annotations are strings.

    Raises:
        WorkflowDefinitionError: not a TypedDict, or a key the state lacks.
    """
    if input_type is None:
        return None
    if not is_typeddict(input_type):
        raise WorkflowDefinitionError(
            f"workflow {workflow!r}: input={input_type!r} must be a TypedDict of state keys"
        )
    hints = get_type_hints(input_type, include_extras=True)
    undeclared = sorted(set(hints) - set(state_keys)) if state_keys else []
    if undeclared:
        raise WorkflowDefinitionError(
            f"workflow {workflow!r}: input keys {undeclared} are not in its state "
            f"(keys: {sorted(state_keys)})"
        )
    total = getattr(input_type, "__total__", True)
    required = {
        key
        for key, hint in hints.items()
        if get_origin(hint) in _REQUIRED or (total and get_origin(hint) not in _NOT_REQUIRED)
    }
    return frozenset(hints), frozenset(required)


def check_input(workflow: str, keys: InputKeys | None, input: Mapping[str, Any] | None) -> None:
    """Check a run's input against its workflow's input type (None: any state keys).

    Raises:
        ConfigError: a required key missing, or a key the input type lacks.
    """
    if keys is None:
        return
    known, required = keys
    given = set(input or {})
    missing, unknown = sorted(required - given), sorted(given - known)
    if missing or unknown:
        raise ConfigError(
            f"input of workflow {workflow!r}: missing {missing}, unknown {unknown}; its "
            f"input type takes {sorted(known)} (required: {sorted(required)}). Nothing was "
            "recorded"
        )
