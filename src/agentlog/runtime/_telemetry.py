"""What the runtime tells a telemetry back end, and the back end that does nothing.

The runtime reports what happens to the runs it drives through
:class:`Telemetry`: the run driven here, each step attempt, each task
attempt, each event recorded (an interrupt, a timer that fired, a message),
lease renewals and takeovers. This base class does nothing and costs a
method call; it is what runs when OpenTelemetry is not installed, or when
``RuntimeConfig(telemetry="off")``. :func:`choose` picks the back end once,
when a runtime's driver is built: ``"auto"`` loads
:class:`agentlog.otel.OpenTelemetry` (by name, only if the ``opentelemetry``
package can be found: nothing is imported otherwise).

The driver sets :data:`TELEMETRY` in each run's task, so the executor and
the task calls of that run find it without being handed it; anything that
runs a step elsewhere (a replay) gets the base class.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Coroutine, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from agentlog.errors import ConfigError

if TYPE_CHECKING:
    from agentlog.eventlog.events import EventData
    from agentlog.projector._state import RunState

__all__ = [
    "NO_TELEMETRY",
    "TELEMETRY",
    "Attempt",
    "Telemetry",
    "TelemetryChoice",
    "choose",
    "trace_id",
]

T = TypeVar("T")

#: What ``RuntimeConfig.telemetry`` takes: a back end, ``"auto"`` or ``"off"``.
TelemetryChoice = Literal["auto", "off"]


class Attempt:
    """One step or task attempt being measured; this one measures nothing."""

    __slots__ = ()

    def failed(self, error: BaseException) -> None:
        """The attempt raised ``error`` (it may still be retried)."""

    def end(self) -> None:
        """The attempt is over (call once, in the frame that began it)."""


_NO_ATTEMPT = Attempt()


class Telemetry:
    """The runtime's telemetry hooks. This base does nothing: every method is
    a no-op, so the runtime calls them unconditionally."""

    def started(self, run_id: str, workflow: str) -> dict[str, Any]:
        """A run is being started: what to store in its RunStarted's limits
        (``{"trace": {"traceparent": ...}}``) so that every process that
        drives it later continues the same trace; empty when not traced."""
        return {}

    def run(
        self, driving: Coroutine[Any, Any, T], state: RunState, worker: str
    ) -> Coroutine[Any, Any, T]:
        """``driving`` (the executor's run of ``state``'s run on ``worker``),
        measured: the span of this process driving the run."""
        return driving

    def step(
        self, state: RunState, step: str, superstep: int, branch: int, attempt: int
    ) -> Attempt:
        """One attempt of one step of ``state``'s run begins (in the step's task)."""
        return _NO_ATTEMPT

    def task(self, state: RunState, step: str, name: str, key: str, attempt: int) -> Attempt:
        """One attempt of one task's effect begins (in the task's call)."""
        return _NO_ATTEMPT

    def recorded(self, state: RunState, data: EventData) -> None:
        """``data`` was recorded as ``state``'s latest event (by a writer of this process)."""

    def lease_renewed(self, state: RunState, worker: str) -> None:
        """``worker`` renewed its lease on ``state``'s run."""

    def taken_over(self, state: RunState, worker: str) -> None:
        """``worker`` took over ``state``'s running run, left by an earlier writer."""


#: The back end that does nothing.
NO_TELEMETRY = Telemetry()

#: The telemetry of the run whose task reads it (set by the driver).
TELEMETRY: ContextVar[Telemetry] = ContextVar("agentlog_telemetry", default=NO_TELEMETRY)


def trace_id(limits: Mapping[str, Any]) -> str | None:
    """The trace id (32 hex digits) a run's RunStarted ``limits`` store, if
    any: read from the W3C ``traceparent`` (``00-<trace id>-<span id>-<flags>``)
    without OpenTelemetry, so a UI can link to the trace."""
    carrier = limits.get("trace")
    parent = carrier.get("traceparent") if isinstance(carrier, Mapping) else None
    parts = parent.split("-") if isinstance(parent, str) else []
    if len(parts) != 4 or len(parts[1]) != 32 or parts[1] == "0" * 32:
        return None
    try:
        int(parts[1], 16)
    except ValueError:
        return None
    return parts[1].lower()


def choose(choice: Telemetry | TelemetryChoice) -> Telemetry:
    """The back end for ``RuntimeConfig.telemetry``: a :class:`Telemetry` as
    given; ``"off"``: none; ``"auto"``: :class:`agentlog.otel.OpenTelemetry`
    on the global providers if ``opentelemetry`` is installed, else none."""
    if isinstance(choice, Telemetry):
        return choice
    if choice not in ("auto", "off"):
        raise ConfigError(f"telemetry must be 'auto', 'off' or a Telemetry, got {choice!r}")
    if choice == "off" or importlib.util.find_spec("opentelemetry") is None:
        return NO_TELEMETRY
    try:  # by name: the integration is optional and nothing imports it statically
        otel = importlib.import_module("agentlog.otel")
    except ImportError:  # an ``opentelemetry`` package without opentelemetry-api
        return NO_TELEMETRY
    backend: Telemetry = otel.OpenTelemetry()
    return backend
