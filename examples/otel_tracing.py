"""A run traced with OpenTelemetry: one trace across a park, a resume and a second runtime.

With ``opentelemetry-api`` installed and a tracer provider configured, every
run, step, task attempt, interrupt, timer and message is a span, with the
run id, workflow, step, task name, attempt and idempotency key as
attributes. Here the SDK's TracerProvider prints nothing: it collects the
spans in memory (swap in an OTLP exporter to send them to Jaeger, Tempo,
Honeycomb...). The run parks on an approval; a second runtime (another
process, days later, in real life) answers it, and its spans join the same
trace, because the run's first event stores the trace context.

Run it: ``python examples/otel_tracing.py`` (needs ``agentlog[otel]`` and
``opentelemetry-sdk``).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentlog.otel import OpenTelemetry, trace_id_of
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end, task

spans = InMemorySpanExporter()
tracer_provider = TracerProvider()
tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
metrics = InMemoryMetricReader()
# The global providers work too (trace.set_tracer_provider(...)): the runtime
# then traces by default. An explicit OpenTelemetry(...) keeps this example's
# spans to itself.
telemetry = OpenTelemetry(
    tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[metrics])
)

refunds = Workflow("refund", state={"order": "replace", "quote": "replace", "paid": "replace"})


@task(name="quote")
async def quote(order: str) -> int:
    return 2599


@task(name="pay_refund")
async def pay_refund(order: str, cents: int) -> str:
    return f"refunded {cents} on {order}"


@refunds.step(then="pay")
async def price(ctx: StepContext) -> dict[str, Any]:
    return {"quote": await quote(ctx.state["order"])}


@refunds.step
async def pay(ctx: StepContext) -> Any:
    if not ctx.interrupt(f"refund {ctx.state['quote']} cents?"):
        return end(paid="declined")
    return end(paid=await pay_refund(ctx.state["order"], ctx.state["quote"]))


async def main(log_url: str) -> None:
    config = RuntimeConfig(telemetry=telemetry)
    async with await Runtime.open(log_url, workflows=[refunds], config=config) as rt:
        await rt.start(refunds, run_id="refund-A-17", input={"order": "A-17"})
        state = await rt.wait("refund-A-17", timeout=60)
        print(f"refund-A-17: {state.status}, trace {trace_id_of(state)}")
    # Another runtime (another process, days later) answers: the same trace goes on.
    async with await Runtime.open(log_url, workflows=[refunds], config=config) as rt:
        await rt.resume("refund-A-17", True)
        state = await rt.wait("refund-A-17", timeout=60)
    finished = spans.get_finished_spans()
    traces = {span.context.trace_id for span in finished if span.context is not None}
    for span in finished:
        print(f"  {span.name}")
    print(f"refund-A-17: {state.status}; {len(finished)} spans in {len(traces)} trace")
    tracer_provider.shutdown()


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    asyncio.run(main(f"sqlite:///{folder / 'otel.db'}"))
