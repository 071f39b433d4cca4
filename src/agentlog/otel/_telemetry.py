"""The runtime's telemetry hooks on OpenTelemetry's public API: spans and metrics.

Spans, all in the run's one trace:

* ``agentlog.start <workflow>``: the run was started (a child of the
  caller's current span, if any). Its W3C ``traceparent`` is stored in the
  run's RunStarted (``limits["trace"]``), so every process that drives the
  run later, after a resume days on or a takeover after a SIGKILL, starts
  its spans under it;
* ``agentlog.run <workflow>``: one process driving the run, until it parks,
  ends, hands over or stops (a SIGKILLed process never ends it; the
  takeover's span follows in the same trace);
* ``agentlog.step <step>``: one attempt of one step, current while the step
  runs, so spans the step's own code makes are its children;
* ``agentlog.task <name>``: one attempt of one task's effect;
* ``agentlog.interrupt``, ``agentlog.resume``, ``agentlog.timer``,
  ``agentlog.message.sent``, ``agentlog.message.received`` and
  ``agentlog.takeover``: when each is recorded (zero-length spans).

Errors set the span's status (a step or task that raised; a run that
failed). Metrics: see :class:`OpenTelemetry`.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Link, Span, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agentlog import __version__
from agentlog.eventlog.events import (
    EventData,
    InterruptRaised,
    MessageReceived,
    MessageSent,
    ResumeReceived,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunStarted,
    RunStatus,
    TimerFired,
)
from agentlog.projector._state import RunState
from agentlog.runtime._telemetry import Attempt, Telemetry

__all__ = ["OpenTelemetry"]

T = TypeVar("T")

#: Span attribute names (and the metrics' attribute names).
RUN_ID, WORKFLOW, STEP, TASK = (
    "agentlog.run_id",
    "agentlog.workflow",
    "agentlog.step",
    "agentlog.task",
)
ATTEMPT, KEY, WORKER = "agentlog.attempt", "agentlog.idempotency_key", "agentlog.worker"
SUPERSTEP, BRANCH, STATUS = "agentlog.superstep", "agentlog.branch", "agentlog.status"
OUTCOME, TOPIC, KIND = "agentlog.outcome", "agentlog.topic", "agentlog.interrupt.kind"

_W3C = TraceContextTextMapPropagator()  # W3C trace context, whatever the global propagator

#: Recorded events that get a span of their own, and its name.
_POINTS: dict[type[EventData], str] = {
    InterruptRaised: "agentlog.interrupt",
    ResumeReceived: "agentlog.resume",
    TimerFired: "agentlog.timer",
    MessageSent: "agentlog.message.sent",
    MessageReceived: "agentlog.message.received",
}


#: Where the API's own providers (proxies and no-op ones) are defined.
_API_MODULES = ("opentelemetry.trace", "opentelemetry.metrics")


def _api_own_providers(
    tracer_provider: trace.TracerProvider | None, meter_provider: metrics.MeterProvider | None
) -> bool:
    """Whether both providers (None: the global one) are the API's own.

    Until an application sets a provider (the SDK's, a vendor's), the API
    hands out its proxies, which forward to no-op tracers and meters; its
    ``NoOpTracerProvider`` and ``NoOpMeterProvider`` do nothing either. With
    those, a span is the invalid one and a measurement goes nowhere. The
    global ones are read through the public getters (``get_tracer_provider``
    reads ``os.environ`` on each call, about 1 to 2 µs), so this is asked
    once per run a process drives, not per step.
    """
    providers = (
        tracer_provider if tracer_provider is not None else trace.get_tracer_provider(),
        meter_provider if meter_provider is not None else metrics.get_meter_provider(),
    )
    return all(type(p).__module__.startswith(_API_MODULES) for p in providers)


#: The attempt of a step or task that nothing measures (the base class's).
_UNMEASURED = Attempt()


class OpenTelemetry(Telemetry):
    """Traces and metrics of the runs a runtime drives, through OpenTelemetry.

    ``RuntimeConfig(telemetry="auto")`` (the default) uses one on the global
    providers when ``opentelemetry-api`` is installed; pass one explicitly to
    use other providers (a test's in-memory exporters)::

        Runtime.open(url, workflows=[wf], config=RuntimeConfig(
            telemetry=OpenTelemetry(tracer_provider=provider, meter_provider=meters)))

    Metrics (instrument names; attributes ``agentlog.workflow``, and where
    it says so ``agentlog.step``, ``agentlog.task``, ``agentlog.outcome``
    (``ok``, ``error``, ``interrupted``), ``agentlog.worker``):

    * ``agentlog.runs.started``, ``agentlog.runs.completed``,
      ``agentlog.runs.failed``, ``agentlog.runs.cancelled``: counters;
    * ``agentlog.step.duration``, ``agentlog.task.duration``: histograms in
      seconds, per step (task) and outcome;
    * ``agentlog.runs.in_flight``: runs this worker drives now (by worker);
    * ``agentlog.lease.renewals``, ``agentlog.lease.takeovers``: counters
      by worker; a takeover is a run continued after its last writer's
      lease ran out (it died or hung), not one it let go of.

    Args:
        tracer_provider: where spans go (default: the global one).
        meter_provider: where metrics go (default: the global one).
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self._tracer = trace.get_tracer("agentlog", __version__, tracer_provider=tracer_provider)
        #: While both providers are the API's own (its proxies before a global
        #: provider is set, or its no-op ones), a step or task attempt is not
        #: measured at all (issue 23: its span, attributes and histogram cost 3 to
        #: 6 µs a step for nothing). Asked again when a run starts and when a
        #: process starts driving one, so a global provider set later is used
        #: from the next run.
        self._providers = (tracer_provider, meter_provider)
        self._idle = _api_own_providers(*self._providers)
        meter = metrics.get_meter("agentlog", __version__, meter_provider=meter_provider)
        self._started = meter.create_counter("agentlog.runs.started", "{run}", "Runs started")
        self._ended = {
            RunCompleted: meter.create_counter(
                "agentlog.runs.completed", "{run}", "Runs completed"
            ),
            RunFailed: meter.create_counter("agentlog.runs.failed", "{run}", "Runs failed"),
            RunCancelled: meter.create_counter(
                "agentlog.runs.cancelled", "{run}", "Runs cancelled"
            ),
        }
        self._in_flight = meter.create_up_down_counter(
            "agentlog.runs.in_flight", "{run}", "Runs this worker drives now"
        )
        self._step_seconds = meter.create_histogram(
            "agentlog.step.duration", "s", "How long one attempt of a step took"
        )
        self._task_seconds = meter.create_histogram(
            "agentlog.task.duration", "s", "How long one attempt of a task's effect took"
        )
        self._renewals = meter.create_counter(
            "agentlog.lease.renewals", "{renewal}", "Writer lease renewals"
        )
        self._takeovers = meter.create_counter(
            "agentlog.lease.takeovers",
            "{run}",
            "Runs taken over after their writer's lease ran out",
        )

    def started(self, run_id: str, workflow: str) -> dict[str, Any]:
        self._idle = _api_own_providers(*self._providers)
        attributes = {RUN_ID: run_id, WORKFLOW: workflow}
        span = self._tracer.start_span(f"agentlog.start {workflow}", attributes=attributes)
        span.end()
        if not span.get_span_context().is_valid:
            return {}  # not traced: no provider (nothing to continue)
        carrier: dict[str, str] = {}
        _W3C.inject(carrier, context=trace.set_span_in_context(span))
        return {"trace": carrier}

    def run(
        self, driving: Coroutine[Any, Any, T], state: RunState, worker: str
    ) -> Coroutine[Any, Any, T]:
        return self._run(driving, state, worker)

    async def _run(self, driving: Coroutine[Any, Any, T], state: RunState, worker: str) -> T:
        self._idle = _api_own_providers(*self._providers)
        caller = trace.get_current_span().get_span_context()
        parent = stored_context(state)
        links = [Link(caller)] if caller.is_valid and not _in_trace(caller, parent) else None
        attributes = {RUN_ID: state.run_id, WORKFLOW: state.workflow, WORKER: worker}
        span = self._tracer.start_span(
            f"agentlog.run {state.workflow}",
            context=parent,
            attributes=attributes,
            links=links,
            record_exception=False,
            set_status_on_exception=False,
        )
        flight = {WORKER: worker}
        self._in_flight.add(1, flight)
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            result = await driving
        except BaseException as exc:
            if isinstance(exc, Exception):
                _error(span, exc)
            else:  # cancelled (a fenced writer, a stop): not the run's failure
                span.set_attribute(OUTCOME, "stopped")
            raise
        finally:
            otel_context.detach(token)
            self._in_flight.add(-1, flight)
            span.set_attribute(STATUS, state.status)
            if state.status == RunStatus.FAILED:
                span.set_status(Status(StatusCode.ERROR, state.error))
            span.end()
        return result

    def step(
        self, state: RunState, step: str, superstep: int, branch: int, attempt: int
    ) -> Attempt:
        if self._idle:  # the API's own providers: nothing would be recorded
            return _UNMEASURED
        attributes: dict[str, str | int] = {
            RUN_ID: state.run_id,
            WORKFLOW: state.workflow,
            STEP: step,
            SUPERSTEP: superstep,
            BRANCH: branch,
            ATTEMPT: attempt,
        }
        span = self._tracer.start_span(f"agentlog.step {step}", attributes=attributes)
        measured = {WORKFLOW: state.workflow, STEP: step}
        return _Attempt(span, self._step_seconds, measured, (state, superstep, branch))

    def task(self, state: RunState, step: str, name: str, key: str, attempt: int) -> Attempt:
        if self._idle:
            return _UNMEASURED
        attributes: dict[str, str | int] = {
            RUN_ID: state.run_id,
            WORKFLOW: state.workflow,
            STEP: step,
            TASK: name,
            ATTEMPT: attempt,
            KEY: key,
        }
        span = self._tracer.start_span(f"agentlog.task {name}", attributes=attributes)
        return _Attempt(span, self._task_seconds, {WORKFLOW: state.workflow, TASK: name}, None)

    def recorded(self, state: RunState, data: EventData) -> None:
        kind = type(data)
        point = _POINTS.get(kind)
        if point is not None:
            self._point(point, state, _point_attributes(data))
        elif kind is RunStarted:
            self._started.add(1, {WORKFLOW: state.workflow})
        elif kind in self._ended:
            self._ended[kind].add(1, {WORKFLOW: state.workflow})

    def lease_renewed(self, state: RunState, worker: str) -> None:
        self._renewals.add(1, {WORKFLOW: state.workflow, WORKER: worker})

    def taken_over(self, state: RunState, worker: str) -> None:
        self._takeovers.add(1, {WORKFLOW: state.workflow, WORKER: worker})
        self._point("agentlog.takeover", state, {WORKER: worker})

    def _point(self, name: str, state: RunState, attributes: Mapping[str, Any]) -> None:
        """A zero-length span for something recorded, in the run's trace: under
        the current span (a step's, the run's) when it is in that trace, else
        under the run's start (a timer fired or an answer recorded by a worker
        or a client outside any drive)."""
        current = trace.get_current_span().get_span_context()
        stored = stored_context(state)
        parent = None if _in_trace(current, stored) else stored
        base = {RUN_ID: state.run_id, WORKFLOW: state.workflow, **attributes}
        self._tracer.start_span(name, context=parent, attributes=base).end()


class _Attempt(Attempt):
    """A step or task attempt's span, current until :meth:`end`, and its duration."""

    __slots__ = ("_attributes", "_began", "_branch", "_histogram", "_outcome", "_span", "_token")

    def __init__(
        self,
        span: Span,
        histogram: metrics.Histogram,
        attributes: dict[str, Any],
        branch: tuple[RunState, int, int] | None,
    ) -> None:
        self._span, self._histogram, self._attributes = span, histogram, attributes
        self._branch = branch  # a step's run, superstep, branch: it may end on an interrupt
        self._outcome = "ok"
        # Current while the attempt runs (its children's parent); a span with no
        # valid context (no provider configured) has no children to adopt.
        valid = span.get_span_context().is_valid
        self._token = otel_context.attach(trace.set_span_in_context(span)) if valid else None
        self._began = time.perf_counter()

    def failed(self, error: BaseException) -> None:
        self._outcome = "error"
        _error(self._span, error)

    def end(self) -> None:
        seconds = time.perf_counter() - self._began
        if self._token is not None:
            otel_context.detach(self._token)
        if self._outcome == "ok" and self._branch is not None and _asked(*self._branch):
            self._outcome = "interrupted"
        self._span.set_attribute(OUTCOME, self._outcome)
        self._span.end()
        self._histogram.record(seconds, {**self._attributes, OUTCOME: self._outcome})


def stored_context(state: RunState) -> otel_context.Context | None:
    """The trace context stored in the run's RunStarted, if any (None: a run
    started untraced, or before agentlog stored one)."""
    carrier = state.limits.get("trace")
    if not isinstance(carrier, dict):
        return None
    return _W3C.extract(carrier)


def trace_id_of(state: RunState) -> str | None:
    """The run's trace id, 32 hex digits, if its RunStarted stored one."""
    parent = stored_context(state)
    found = trace.get_current_span(parent).get_span_context() if parent is not None else None
    return trace.format_trace_id(found.trace_id) if found is not None and found.is_valid else None


def _in_trace(span: trace.SpanContext, parent: otel_context.Context | None) -> bool:
    """Whether ``span`` is valid and in the trace of ``parent`` (True for any
    valid span when there is no stored trace: the current one is as good)."""
    if not span.is_valid:
        return False
    if parent is None:
        return True
    return trace.get_current_span(parent).get_span_context().trace_id == span.trace_id


def _asked(state: RunState, superstep: int, branch: int) -> bool:
    """Whether the branch's step left an open interrupt (it parks the run)."""
    return any(
        i.get("superstep") == superstep and i.get("branch") == branch for i in state.interrupts
    )


def _error(span: Span, error: BaseException) -> None:
    span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))


def _point_attributes(data: EventData) -> dict[str, Any]:
    if isinstance(data, InterruptRaised):
        return {STEP: data.step, SUPERSTEP: data.superstep, BRANCH: data.branch, KIND: data.kind}
    if isinstance(data, MessageReceived):
        return {TOPIC: data.topic, STEP: data.step}
    if isinstance(data, MessageSent):
        return {TOPIC: data.topic}
    if isinstance(data, TimerFired):
        return {"agentlog.timers": list(data.ids)}
    return {}
