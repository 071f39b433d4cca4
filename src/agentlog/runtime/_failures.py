"""A failure as data, and the exception a caller catches rebuilt from it.

A run is often awaited in another process than the one that drove it, and
that process only has the log. So a failure is recorded as data
(:func:`describe`: its class as ``module.QualName``, its message, its
arguments when they are builtin scalars, and its ``__cause__``/``__context__``
chain, bounded), and a caller's ``except PaymentDeclined`` works because
:func:`rebuild` makes an instance of that class again.

The log may come from someone who can write the store but not run code
here, so a recorded name never leads to an import: a class is rebuilt only
if its module is on an allow-list that comes from code (``builtins`` and the
modules of the workflow's own steps), is already loaded, and names an
:class:`Exception` subclass that is not agentlog's own. Anything else is
reported as a typed error carrying the recorded type and message.
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol

from agentlog.errors import AgentlogError, RunCancelledError, RunFailedError, TaskFailedError
from agentlog.eventlog.events import RunStatus
from agentlog.projector._state import RunState, task_attempts

__all__ = [
    "MAX_CAUSES",
    "causes_of",
    "describe",
    "ended_error",
    "rebuild",
    "run_failed",
    "task_failed",
    "with_causes",
    "workflow_modules",
]


class _HasSteps(Protocol):
    """A workflow, as far as the allow-list needs it: its steps' functions."""

    @property
    def steps(self) -> Mapping[str, Any]: ...


#: How many links of a ``__cause__``/``__context__`` chain are recorded.
MAX_CAUSES = 5
#: How long a recorded message may be (a failure is a record, not a dump).
_MAX_MESSAGE = 2000
_SCALARS = (str, int, float, bool, type(None))


def _type_name(cls: type[BaseException]) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def describe(exc: BaseException, message: str | None = None) -> dict[str, Any]:
    """``exc`` as builtin values for an event payload.

    Args:
        message: the message to record instead of ``str(exc)`` (a timeout
            that says which limit it hit).
    """
    text = str(exc) if message is None else message
    failure: dict[str, Any] = {
        "type": _type_name(type(exc)),
        "module": type(exc).__module__,
        "message": text[:_MAX_MESSAGE],
        "causes": [_link(link, implicit) for link, implicit in _chain(exc)],
    }
    args = (text,) if message is not None else exc.args
    if all(isinstance(arg, _SCALARS) for arg in args):
        failure["args"] = [arg[:_MAX_MESSAGE] if isinstance(arg, str) else arg for arg in args]
    return failure


def _link(link: BaseException, implicit: bool) -> dict[str, Any]:
    """One link of a cause chain as data; ``context``: it was the ``__context__``
    (raised while handling it), not an explicit ``raise ... from`` cause."""
    recorded: dict[str, Any] = {
        "type": _type_name(type(link)),
        "module": type(link).__module__,
        "message": str(link)[:_MAX_MESSAGE],
    }
    if all(isinstance(arg, _SCALARS) for arg in link.args):
        recorded["args"] = [a[:_MAX_MESSAGE] if isinstance(a, str) else a for a in link.args]
    if implicit:
        recorded["context"] = True
    return recorded


def _chain(exc: BaseException) -> list[tuple[BaseException, bool]]:
    """The exceptions behind ``exc``, outermost first, at most :data:`MAX_CAUSES`,
    each with whether it is a ``__context__`` (True) or a ``__cause__``."""
    links: list[tuple[BaseException, bool]] = []
    seen = {id(exc)}
    link, implicit = _behind(exc)
    while link is not None and id(link) not in seen and len(links) < MAX_CAUSES:
        seen.add(id(link))
        links.append((link, implicit))
        link, implicit = _behind(link)
    return links


def _behind(exc: BaseException) -> tuple[BaseException | None, bool]:
    if exc.__cause__ is not None:
        return exc.__cause__, False
    return (None if exc.__suppress_context__ else exc.__context__), True


def causes_of(failure: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    """The recorded cause chain as ``(error_type, message)`` pairs."""
    links = (failure or {}).get("causes") or []
    return tuple(
        (str(link.get("type", "")), str(link.get("message", "")))
        for link in links
        if isinstance(link, Mapping)
    )


def workflow_modules(fns: Collection[object]) -> set[str]:
    """The allow-list a workflow's failures are rebuilt from: the modules
    that define its step functions."""
    return {getattr(fn, "__module__", "") for fn in fns} - {""}


def rebuild(failure: Mapping[str, Any] | None, modules: Collection[str]) -> Exception | None:
    """An instance of the recorded class, or None where it cannot be rebuilt safely.

    Only classes of ``builtins`` and of ``modules`` that are already loaded
    are considered (nothing is imported), only :class:`Exception` subclasses
    that are not agentlog's own errors, built with the recorded arguments.
    """
    if not failure:
        return None
    module, name = str(failure.get("module", "")), str(failure.get("type", ""))
    if module != "builtins" and module not in modules:
        return None
    loaded = builtins if module == "builtins" else sys.modules.get(module)
    if loaded is None or not name.startswith(f"{module}."):
        return None
    found: object = loaded
    for part in name[len(module) + 1 :].split("."):
        if part.startswith("<"):  # a class defined in a function: not reachable by name
            return None
        found = getattr(found, part, None)
    if not (
        isinstance(found, type)
        and issubclass(found, Exception)
        and not issubclass(found, AgentlogError)
    ):
        return None
    args = failure.get("args")
    if not isinstance(args, list):
        args = [failure.get("message", "")]
    try:
        return found(*args)
    except Exception:  # a constructor that wants other arguments: not rebuilt
        return None


def with_causes(
    rebuilt: Exception,
    failure: Mapping[str, Any],
    modules: Collection[str],
    one: Callable[[Mapping[str, Any]], Exception | None] | None = None,
) -> Exception:
    """``rebuilt`` with the recorded cause chain behind it, as the live code
    raised it: each link rebuilt by the same allow-list (``one``, default
    :func:`rebuild` with ``modules``), an explicit cause as ``__cause__`` and
    an implicit one as ``__context__``. The chain stops at the first link
    that cannot be rebuilt safely (its class and message stay in the record).
    """
    build = one or (lambda link: rebuild(link, modules))
    last = rebuilt
    for link in failure.get("causes") or []:
        if not isinstance(link, Mapping):
            break
        found = build({**link, "module": _module_of(link, modules)})
        if found is None:
            break
        if link.get("context"):
            last.__context__ = found
        else:
            last.__cause__ = found
        last = found
    return rebuilt


def _module_of(link: Mapping[str, Any], modules: Collection[str]) -> str:
    """A link's module: recorded, or (a record from before links had one) the
    longest allowed module its ``module.QualName`` starts with."""
    module = link.get("module")
    if isinstance(module, str) and module:
        return module
    name = str(link.get("type", ""))
    known = [m for m in ("builtins", *modules) if name.startswith(f"{m}.")]
    return max(known, key=len, default="")


def ended_error(state: RunState, workflow: _HasSteps | None) -> Exception:
    """What a caller awaiting the result of a failed or cancelled run gets.

    A failed run: an instance of the failure's own class where it can be
    rebuilt safely (a builtin, or a class defined in a module of the
    workflow's steps, already imported; a name read from the log never
    causes an import), with a :class:`RunFailedError` naming the run as its
    ``__cause__``; otherwise that ``RunFailedError``, with the recorded
    ``error_type``, ``message`` and ``causes``. A cancelled run:
    :class:`RunCancelledError`.

    Args:
        workflow: the run's workflow as registered here (None: not known
            here; then only builtins are rebuilt).
    """
    if state.status == RunStatus.CANCELLED:
        return RunCancelledError(state.run_id, state.error)
    fns = [step.fn for step in workflow.steps.values()] if workflow is not None else []
    return run_failed(state.run_id, state.error, state.failure, workflow_modules(fns))


def run_failed(
    run_id: str, error: str, failure: Mapping[str, Any] | None, modules: Collection[str]
) -> Exception:
    """What a caller awaiting a failed run gets: the original class rebuilt,
    caused by a :class:`RunFailedError` that names the run; else that error."""
    typed = RunFailedError(
        f"run {run_id!r} failed: {error}",
        run_id=run_id,
        error_type=str((failure or {}).get("type", "")),
        message=str((failure or {}).get("message", "")),
        causes=causes_of(failure),
    )
    return _caused_by(rebuild(failure, modules), typed)


def task_failed(
    task: Mapping[str, Any], where: tuple[str, str, str, str], modules: Collection[str]
) -> Exception:
    """What a step gets when it calls a task whose retry policy gave up: the
    original class rebuilt, caused by a :class:`TaskFailedError`; else that error.

    Args:
        task: the task's folded record (``RunState.tasks[key]``).
        where: run id, step, task name and idempotency key.
    """
    failure = task.get("failure")
    run_id, step, name, key = where
    typed = TaskFailedError(
        run_id,
        step,
        name,
        key,
        str(task.get("error", "")),
        task_attempts(dict(task)),
        error_type=str((failure or {}).get("type", "")),
        message=str((failure or {}).get("message", "")),
        causes=causes_of(failure),
    )
    return _caused_by(rebuild(failure, modules), typed)


def _caused_by(rebuilt: Exception | None, typed: Exception) -> Exception:
    if rebuilt is None:
        return typed
    rebuilt.__cause__ = typed
    return rebuilt
