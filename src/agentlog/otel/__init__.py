"""OpenTelemetry traces and metrics of agentlog runs: ``agentlog[otel]``.

With ``opentelemetry-api`` installed, a runtime reports through
OpenTelemetry's global providers by default (``RuntimeConfig(telemetry=
"auto")``); configure a tracer provider and every run, step, task attempt,
interrupt, timer and message is a span, in one trace per run across
resumes, processes and takeovers. Pass :class:`OpenTelemetry` to use other
providers. Only OpenTelemetry's public API is used (``opentelemetry.trace``,
``opentelemetry.metrics``, ``opentelemetry.context`` and the W3C trace
context propagator). Nothing else in agentlog imports this package: the
runtime loads it by name, and only when ``opentelemetry`` is installed.
See docs/opentelemetry.md.
"""

from agentlog.otel._telemetry import OpenTelemetry, trace_id_of

__all__ = ["OpenTelemetry", "trace_id_of"]
