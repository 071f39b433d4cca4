"""A process that drives one traced run, for the SIGKILL + takeover trace test.

Usage::

    python -m tests.otel.traced_worker LOG_URL SPANS_FILE first|second [fleet|submit]

Every span it ends is written at once to SPANS_FILE as one JSON line (the
SDK's ConsoleSpanExporter through a SimpleSpanProcessor), so a SIGKILL loses
only the spans still open. ``first`` prints READY once its runtime is open,
starts run ``r`` and prints HUNG when the run's ``slow`` task has started
(and never returns: the test SIGKILLs it there). ``second`` runs a worker
that takes the run over once the dead writer's lease runs out, waits for the
run to end, and prints its status and the takeovers it counted as JSON.

With ``fleet`` both are workers of a fleet (on Kafka: one consumer group) and
``first`` does not start the run: ``... submit fleet`` records it, as a
client that executes nothing, and exits once it is submitted.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any, TextIO

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from agentlog.otel import OpenTelemetry
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end, task

LEASE_SECONDS = 0.5
ROLE = sys.argv[3] if len(sys.argv) > 3 else "second"
FLEET = sys.argv[4:5] == ["fleet"]

wf = Workflow("traced", state={"prepared": "replace", "done": "replace"})


@task(name="prepare")
async def prepare() -> str:
    return "prepared"


@task(name="slow")
async def slow() -> str:
    if ROLE == "first":
        print("HUNG", flush=True)
        await asyncio.Event().wait()  # until SIGKILLed
    return "done"


@wf.step(then="hang")
async def first(ctx: StepContext) -> dict[str, Any]:
    return {"prepared": await prepare()}


@wf.step
async def hang(ctx: StepContext) -> Any:
    return end(done=await slow())


def _line(span: ReadableSpan) -> str:
    return span.to_json(indent=None) + "\n"


async def main(url: str, out: TextIO) -> None:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(
        SimpleSpanProcessor(ConsoleSpanExporter(out=out, formatter=_line))
    )
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    telemetry = OpenTelemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
    if ROLE == "submit":
        config = RuntimeConfig(owner="client", execute=False, worker=False, telemetry=telemetry)
        async with await Runtime.open(url, workflows=[wf], config=config) as rt:
            await rt.submit(wf, run_id="r")
        tracer_provider.shutdown()
        print("SUBMITTED", flush=True)
        return
    worker = ROLE == "second" or FLEET
    config = RuntimeConfig(
        owner=ROLE, lease_seconds=LEASE_SECONDS, worker=worker, telemetry=telemetry
    )
    async with await Runtime.open(url, workflows=[wf], config=config) as rt:
        print("READY", flush=True)
        if ROLE == "first":
            if not FLEET:
                await rt.start(wf, run_id="r")
            await asyncio.Event().wait()
        async with asyncio.timeout(120):
            state = await rt.wait("r")
    takeovers = 0
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data is not None else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "agentlog.lease.takeovers":
                    takeovers += sum(p.value for p in metric.data.data_points)  # type: ignore[union-attr]
    print(json.dumps({"status": state.status, "takeovers": takeovers}), flush=True)
    tracer_provider.shutdown()
    meter_provider.shutdown()


if __name__ == "__main__":
    with open(sys.argv[2], "a", buffering=1) as spans:  # a line is written at once
        asyncio.run(main(sys.argv[1], spans))
