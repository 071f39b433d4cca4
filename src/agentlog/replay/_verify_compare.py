"""Comparing what the code emits with what a history recorded, for the replay check.

:func:`compare` says whether an emitted event is the recorded one (or what
differed), :func:`describe` names an event in a sentence, and
:func:`recorded_error` rebuilds a task's recorded failure so that a step's
``except`` clauses see what they saw when it was recorded (retry policies do
not decide again in a replay: the runtime follows the verdict its writer
returns with each recorded failure, see ``ReplayWriter.emit``).
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Container, Iterator
from typing import Any

from agentlog.errors import AgentlogError
from agentlog.eventlog.events import (
    EventData,
    InterruptRaised,
    MessageReceived,
    ProgressReported,
    StepCompleted,
    StepFailed,
    SuperstepCommitted,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
    ValuePublished,
)

__all__ = ["Mismatch", "RecordedTaskError", "compare", "describe", "kind_of", "recorded_error"]


@dataclasses.dataclass(frozen=True, slots=True)
class Mismatch:
    """What differed, before it is tied to a run (see ``verify.Divergence``)."""

    seq: int
    kind: str
    expected: Any
    got: Any
    message: str


class RecordedTaskError(Exception):
    """A task's recorded failure, raised again in a replay (when its type is not a builtin)."""


def compare(seq: int, expected: EventData, got: EventData) -> Mismatch | None:
    """None when ``got`` is what the history recorded at ``seq``; else what differed."""
    if type(expected) is not type(got):
        tasks = isinstance(expected, TaskStarted) or isinstance(got, TaskStarted)
        kind = "task" if tasks else "step"
        return Mismatch(
            seq,
            kind,
            describe(expected),
            describe(got),
            f"the history has {describe(expected)} here; the code did {describe(got)}",
        )
    if isinstance(expected, TaskStarted):
        assert isinstance(got, TaskStarted)
        if (expected.name, expected.key) != (got.name, got.key):
            return Mismatch(
                seq,
                "task",
                describe(expected),
                describe(got),
                f"step {expected.step!r} called {describe(got)} where the history has "
                f"{describe(expected)}",
            )
    elif isinstance(expected, StepCompleted):
        assert isinstance(got, StepCompleted)
        if expected.step != got.step:
            return _step_mismatch(seq, expected.step, got.step)
        if expected.writes != got.writes:
            return Mismatch(
                seq,
                "write",
                expected.writes,
                got.writes,
                f"step {got.step!r} wrote {got.writes!r}; the history has {expected.writes!r}",
            )
        if expected.goto != got.goto:
            return Mismatch(
                seq,
                "step",
                expected.goto,
                got.goto,
                f"step {got.step!r} went to {got.goto!r}; the history went to {expected.goto!r}",
            )
    elif isinstance(expected, MessageReceived | ValuePublished):
        # the same message (by its seq) or the same published key, at this call
        said = ("topic", "seq") if isinstance(expected, MessageReceived) else ("key",)
        if [getattr(expected, n) for n in said] != [getattr(got, n) for n in said]:
            return Mismatch(
                seq,
                "step",
                describe(expected),
                describe(got),
                f"step {expected.step!r} did {got.to_dict()} where the history has "
                f"{expected.to_dict()}",
            )
    elif isinstance(expected, StepFailed | InterruptRaised | ProgressReported):
        if expected.step != got.step:  # type: ignore[attr-defined]
            return _step_mismatch(seq, expected.step, got.step)  # type: ignore[attr-defined]
    elif isinstance(expected, SuperstepCommitted):
        assert isinstance(got, SuperstepCommitted)
        if expected.next != got.next:
            return Mismatch(
                seq,
                "step",
                expected.next,
                got.next,
                f"the next steps are {got.next!r}; the history has {expected.next!r}",
            )
    return None


def _step_mismatch(seq: int, expected: str, got: str) -> Mismatch:
    return Mismatch(
        seq, "step", expected, got, f"the code ran step {got!r} where the history ran {expected!r}"
    )


def kind_of(data: EventData) -> str:
    return "task" if isinstance(data, TaskStarted | TaskCompleted | TaskFailed) else "step"


def describe(data: EventData) -> str:
    """A short name for an event: ``task 'search' (call 0)``, ``step 'plan'``..."""
    if isinstance(data, TaskStarted):
        return f"task {data.name!r} (call {data.call_index})"
    step = getattr(data, "step", None)
    return f"{data.type} of step {step!r}" if step is not None else data.type


def recorded_error(error: str, modules: Container[str] = ()) -> Exception:
    """The recorded task error (``"Type: message"``), rebuilt as its class when
    its name is on the allow-list, so that a step's ``except`` clauses see what
    they saw then: a builtin (``except ValueError``), or an exception class
    defined in ``modules``, the workflow's own. Else a :class:`RecordedTaskError`.

    The allow-list comes from code, never from the stored text: a recorded name
    can only pick a builtin or a class the workflow's modules define. Retry
    verdicts never depend on it (the replay follows the recorded ones).
    """
    name, _, message = error.partition(": ")
    cls = _error_class(name, modules)
    if cls is not None:
        try:
            return cls(message)
        except Exception:  # a constructor that takes more: the generic error below
            pass
    return RecordedTaskError(error)


def _error_class(name: str, modules: Container[str]) -> type[Exception] | None:
    """The one exception class ``name`` can mean here, or None: a wrong class
    would send the step down a path it did not take, so a guess is not made."""
    builtin = getattr(builtins, name, None)
    if isinstance(builtin, type) and issubclass(builtin, Exception):
        return builtin
    # agentlog's own errors are the runtime's, never rebuilt as a task's failure
    found = [
        c
        for c in _loaded(Exception)
        if c.__name__ == name and c.__module__ in modules and not _ours(c)
    ]
    return found[0] if len(found) == 1 else None


def _loaded(root: type[Exception]) -> Iterator[type[Exception]]:
    """Every subclass of ``root`` loaded in this process (the app is imported)."""
    seen: set[type[Exception]] = set()
    todo = [root]
    while todo:
        for sub in type.__subclasses__(todo.pop()):
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
                yield sub


def _ours(cls: type[Exception]) -> bool:
    return issubclass(cls, AgentlogError) or cls is RecordedTaskError
