"""OpenTelemetry for tests: a back end on the SDK's in-memory exporters (no global provider)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentlog.otel import OpenTelemetry


@dataclass
class Exported:
    """What a runtime reported: its back end, the spans and the metrics."""

    telemetry: OpenTelemetry
    spans: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    @classmethod
    def create(cls) -> Exported:
        spans = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
        reader = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[reader])
        telemetry = OpenTelemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
        return cls(telemetry, spans, reader, tracer_provider, meter_provider)

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()

    def named(self, prefix: str) -> list[ReadableSpan]:
        """The finished spans whose name starts with ``prefix``, in the order they ended."""
        return [s for s in self.spans.get_finished_spans() if s.name.startswith(prefix)]

    def points(self, name: str) -> list[tuple[dict[str, Any], float | int]]:
        """Each data point of the metric ``name``: its attributes and its value
        (a histogram's: its count)."""
        found: list[tuple[dict[str, Any], float | int]] = []
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data is not None else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name != name:
                        continue
                    for point in metric.data.data_points:
                        value = getattr(point, "value", None)
                        if value is None:
                            value = point.count  # type: ignore[union-attr]
                        found.append((dict(point.attributes or {}), value))
        return found

    def total(self, name: str, **attributes: Any) -> float:
        """The sum of the metric's points whose attributes include ``attributes``."""
        wanted = {f"agentlog.{k}": v for k, v in attributes.items()}
        return sum(v for a, v in self.points(name) if wanted.items() <= a.items())
