"""Comparing what the code emits with what a history recorded, for the replay check.

:func:`compare` says whether an emitted event is the recorded one (or what
differed), :func:`describe` names an event in a sentence, and
:func:`recorded_error` rebuilds a task's recorded failure so that a step's
``except`` clauses and retry policies see what they saw when it was recorded.
"""

from __future__ import annotations

import builtins
import dataclasses
from typing import Any

from agentlog.eventlog.events import (
    EventData,
    InterruptRaised,
    ProgressReported,
    StepCompleted,
    StepFailed,
    SuperstepCommitted,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
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


def recorded_error(error: str) -> Exception:
    """The recorded task error, as its builtin type when it names one (so that a
    step's ``except ValueError`` and its retry policy see what they saw then)."""
    name, _, message = error.partition(": ")
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:  # an exotic constructor: the generic error below
            return RecordedTaskError(error)
    return RecordedTaskError(error)
