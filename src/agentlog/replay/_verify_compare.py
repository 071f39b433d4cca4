"""Comparing what the code emits with what a history recorded, for the replay check.

:func:`compare` says whether an emitted event is the recorded one (or what
differed), :func:`describe` names an event in a sentence, and
:func:`recorded_error` rebuilds a task's recorded failure (its class and
arguments, through the runtime's one allow-list) so that a step's
``except`` clauses see what they saw when it was recorded (retry policies do
not decide again in a replay: the runtime follows the verdict its writer
returns with each recorded failure, see ``ReplayWriter.emit``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any

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
from agentlog.runtime._failures import rebuild, with_causes

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


def recorded_error(failed: TaskFailed, modules: Collection[str] = ()) -> Exception:
    """The task's recorded failure raised again, so that a step's ``except``
    clauses see what they saw then: its own class built from its recorded
    arguments (``TaskFailed.failure``), where the one allow-list of
    :func:`agentlog.runtime._failures.rebuild` allows it (builtins and the
    workflow's own ``modules``, already loaded; nothing is imported). Else a
    :class:`RecordedTaskError` with the recorded text. The recorded cause
    chain is rebuilt behind it by the same rules
    (:func:`~agentlog.runtime._failures.with_causes`), so a step that reads
    ``exc.__cause__`` or ``exc.__context__`` takes the path it took live.

    A history recorded before failures were data has only the text
    (``"Type: message"``): a builtin is rebuilt from it, by the same rules.
    Retry verdicts never depend on it (the replay follows the recorded ones).
    """
    failure = failed.failure
    if failure is None:
        name, _, message = failed.error.partition(": ")
        failure = {"module": "builtins", "type": f"builtins.{name}", "message": message}
    rebuilt = _one(failure, modules)
    if rebuilt is None:
        return RecordedTaskError(failed.error)
    return with_causes(rebuilt, failure, modules, lambda link: _one(link, modules))


def _one(failure: Mapping[str, Any], modules: Collection[str]) -> Exception | None:
    """One recorded exception rebuilt by the allow-list (a script's classes too)."""
    rebuilt = rebuild(failure, modules)
    if rebuilt is None and failure.get("module") == "__main__":
        rebuilt = _from_script(failure, modules)
    return rebuilt


def _from_script(failure: Mapping[str, Any], modules: Collection[str]) -> Exception | None:
    """A class recorded by a program run as a script (``python billing.py``:
    its module was ``__main__``), rebuilt from the same file loaded here as a
    module (``verify --app billing:wf``): the same qualified name in one of
    the workflow's ``modules``, by the same allow-list."""
    qualname = str(failure.get("type", "")).removeprefix("__main__.")
    for module in modules:
        if module == "__main__":
            continue
        found = rebuild({**failure, "module": module, "type": f"{module}.{qualname}"}, modules)
        if found is not None:
            return found
    return None
