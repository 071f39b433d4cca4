"""OpenTelemetry installed with no SDK configured: the hooks measure nothing,
and providers set later are used from then on.

Issue 23: the step and task hooks cost 3 to 6 µs a step with no provider,
building spans and attributes the API's no-op proxies then drop. Until a
global tracer or meter provider is set, a step or task attempt is now the
base no-op one. A provider set later is picked up as the API's proxies pick
it up. The global providers can be set once per process, so this runs in a
child process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CHILD = """
import asyncio, sys
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentlog.otel import OpenTelemetry
from agentlog.projector._state import RunState
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end, task
from agentlog.runtime._telemetry import Attempt

wf = Workflow("plain", state={"paid": "replace"})

@task
async def pay() -> str:
    return "paid"

@wf.step
async def charge(ctx: StepContext) -> object:
    return end(paid=await pay())

async def main() -> None:
    config = RuntimeConfig(worker=False)
    async with await Runtime.open(sys.argv[1], workflows=[wf], config=config) as rt:
        telemetry = rt.driver.telemetry
        assert isinstance(telemetry, OpenTelemetry), telemetry
        state = RunState(run_id="x", workflow="plain")
        idle = [
            type(telemetry.step(state, "s", 0, 0, 1)),
            type(telemetry.task(state, "s", "t", "k", 1)),
        ]
        print("idle", [kind is Attempt for kind in idle])
        await rt.start(wf, run_id="before")
        await rt.wait("before")
        # Providers configured after the runtime was made, while it runs.
        spans = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
        trace.set_tracer_provider(tracer_provider)
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        await rt.start(wf, run_id="after")
        await rt.wait("after")
    names = sorted(
        (s.name, s.attributes.get("agentlog.run_id")) for s in spans.get_finished_spans()
        if s.name.startswith(("agentlog.step", "agentlog.task"))
    )
    print("spans", names)
    steps = [
        dict(point.attributes)["agentlog.step"]
        for resource in reader.get_metrics_data().resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics if metric.name == "agentlog.step.duration"
        for point in metric.data.data_points
    ]
    print("step durations", steps)

asyncio.run(main())
"""


@pytest.mark.process
def test_no_provider_measures_nothing_and_one_set_later_is_used(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'log.db'}"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "idle [True, True]",  # the base class's attempt: no span, no attributes, no clock
        "spans [('agentlog.step charge', 'after'), ('agentlog.task pay', 'after')]",
        "step durations ['charge']",
    ]
