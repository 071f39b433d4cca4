"""OpenTelemetry's cost on the runtime's hot path: the same steps, four ways.

A loop of steps, each calling one task (a step span and a task span per
step when traced), on the in-memory log (no I/O to hide the cost: the
strictest ratio) and on SQLite in async durability, run in this same process
with:

* ``off``: ``RuntimeConfig(telemetry="off")``, the hooks' no-op base class
  (what runs when OpenTelemetry is not installed);
* ``no-op provider``: :class:`agentlog.otel.OpenTelemetry` on OpenTelemetry's
  ``NoOpTracerProvider`` and ``NoOpMeterProvider``;
* ``auto, nothing configured``: the default with opentelemetry-api installed
  and no provider set (the API's proxies);
* ``SDK + in-memory``: the SDK's TracerProvider with a SimpleSpanProcessor
  into an InMemorySpanExporter, and a MeterProvider with an
  InMemoryMetricReader (every span and metric really recorded).

The four take turns run by run (so drift on a shared machine hits each
alike); each row is the time per step over the runs: median and p99, and
its ratio to ``off`` (the issue's bound for the no-op provider: <= 1.05).
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

from agentlog.eventlog import open_log
from agentlog.otel import OpenTelemetry
from agentlog.runtime import Next, Runtime, RuntimeConfig, StepContext, Workflow, end, goto
from agentlog.runtime._telemetry import Telemetry, TelemetryChoice
from benchmarks.harness import Row, percentile

AREA = "otel"
ROOT = Path(__file__).resolve().parent.parent / ".cache" / "bench"


def loop_workflow(steps: int) -> Workflow:
    """``steps`` steps, each calling one task."""
    wf = Workflow("otel-loop", state={"n": "replace", "last": "replace"}, max_steps=steps + 10)

    @wf.step
    async def loop(ctx: StepContext) -> Next:
        n = ctx.state.get("n", 0) + 1
        last = await ctx.task("work", lambda: n * 2)
        if n >= steps:
            return end(n=n, last=last)
        return goto("loop", n=n, last=last)

    return wf


def _sdk() -> tuple[OpenTelemetry, Callable[[], None]]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return OpenTelemetry(
        tracer_provider=tracer_provider, meter_provider=meter_provider
    ), spans.clear


async def _run(url: str, steps: int, telemetry: Telemetry | TelemetryChoice) -> float:
    """Seconds per step of one run of the loop."""
    event_log = await open_log(url)
    wf = loop_workflow(steps)
    config = RuntimeConfig(worker=False, telemetry=telemetry)
    try:
        async with Runtime(event_log, workflows=[wf], config=config) as runtime:
            started = time.perf_counter()
            await runtime.start(wf, run_id="bench", durability="async")
            state = await runtime.wait("bench")
            elapsed = time.perf_counter() - started
    finally:
        await event_log.close()
    assert state.status == "completed" and state.steps == steps, state.status
    return elapsed / steps


async def _compare(backend: str, steps: int, runs: int) -> list[Row]:
    sdk, clear = _sdk()
    noop = OpenTelemetry(tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider())
    ways: dict[str, Telemetry | TelemetryChoice] = {
        "off": "off",
        "no-op provider": noop,
        "auto, nothing configured": "auto",
        "SDK + in-memory exporter": sdk,
    }
    samples: dict[str, list[float]] = {name: [] for name in ways}
    ROOT.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=ROOT))
    try:
        for index in range(runs + 1):  # the first round warms up, and is dropped
            for name, telemetry in ways.items():
                db = folder / f"{index}-{len(samples)}-{name[:3]}.db"
                url = "memory://" if backend == "memory" else f"sqlite:///{db}"
                per_step = await _run(url, steps, telemetry)
                clear()
                if index:
                    samples[name].append(per_step)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    base = statistics.median(samples["off"])
    rows = []
    for name, values in samples.items():
        median = statistics.median(values)
        rows.append(
            Row(
                AREA,
                f"{backend}: step + task, {name}",
                "us",
                median * 1e6,
                percentile(values, 99) * 1e6,
                {"ratio_to_off": round(median / base, 3), "steps": steps},
                len(values),
            )
        )
    return rows


def collect(quick: bool) -> list[Row]:
    steps, runs = (50, 5) if quick else (200, 15)
    rows = asyncio.run(_compare("memory", steps, runs))
    rows += asyncio.run(_compare("sqlite", steps, runs))
    return rows
