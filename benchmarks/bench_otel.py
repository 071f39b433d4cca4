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
alike); each row is the process CPU time per step over the runs (every
thread's, the SQLite writer's too: what the step costs, which a loaded
machine's scheduling shifts far less than wall time): median and p99, its
ratio to ``off`` (the issue's bound for the no-op provider: <= 1.05), and the
wall-clock median and its ratio beside it.

A last row times the hooks alone, outside any run: one step attempt and one
task attempt begun and ended on the no-op provider (and on the SDK), what
each step of the loop adds to ``off``'s.
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
from agentlog.projector import RunState
from agentlog.runtime import Next, Runtime, RuntimeConfig, StepContext, Workflow, end, goto
from agentlog.runtime._telemetry import NO_TELEMETRY, Telemetry, TelemetryChoice
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


async def _run(url: str, steps: int, telemetry: Telemetry | TelemetryChoice) -> tuple[float, float]:
    """CPU seconds and wall seconds per step of one run of the loop."""
    event_log = await open_log(url)
    wf = loop_workflow(steps)
    config = RuntimeConfig(worker=False, telemetry=telemetry)
    try:
        async with Runtime(event_log, workflows=[wf], config=config) as runtime:
            started, cpu = time.perf_counter(), time.process_time()
            await runtime.start(wf, run_id="bench", durability="async")
            state = await runtime.wait("bench")
            elapsed, used = time.perf_counter() - started, time.process_time() - cpu
    finally:
        await event_log.close()
    assert state.status == "completed" and state.steps == steps, state.status
    return used / steps, elapsed / steps


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
    walls: dict[str, list[float]] = {name: [] for name in ways}
    ROOT.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=ROOT))
    try:
        for index in range(runs + 1):  # the first round warms up, and is dropped
            for name, telemetry in ways.items():
                db = folder / f"{index}-{len(samples)}-{name[:3]}.db"
                url = "memory://" if backend == "memory" else f"sqlite:///{db}"
                cpu, wall = await _run(url, steps, telemetry)
                clear()
                if index:
                    samples[name].append(cpu)
                    walls[name].append(wall)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    base, wall_base = statistics.median(samples["off"]), statistics.median(walls["off"])
    rows = []
    for name, values in samples.items():
        median, wall = statistics.median(values), statistics.median(walls[name])
        extra = {
            "cpu_ratio_to_off": round(median / base, 3),
            "wall_median_us": round(wall * 1e6),
            "wall_ratio_to_off": round(wall / wall_base, 3),
            "steps": steps,
        }
        rows.append(
            Row(
                AREA,
                f"{backend}: step + task, {name} (CPU)",
                "us",
                median * 1e6,
                percentile(values, 99) * 1e6,
                extra,
                len(values),
            )
        )
    return rows


def _hooks(telemetry: Telemetry, calls: int) -> list[float]:
    """CPU seconds per step attempt + task attempt begun and ended (batches of ``calls``)."""
    state = RunState(run_id="bench", workflow="otel-loop")
    samples = []
    for _ in range(21):
        started = time.process_time()
        for attempt in range(calls):
            step = telemetry.step(state, "loop", attempt, 0, 1)
            work = telemetry.task(state, "loop", "work", "key", 1)
            work.end()
            step.end()
        samples.append((time.process_time() - started) / calls)
    return samples[1:]


def _hook_rows(calls: int) -> list[Row]:
    noop = OpenTelemetry(tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider())
    sdk, clear = _sdk()
    rows = []
    for name, telemetry in (("off", NO_TELEMETRY), ("no-op provider", noop), ("SDK", sdk)):
        values = _hooks(telemetry, calls)
        clear()
        rows.append(
            Row(
                AREA,
                f"hooks alone: a step + a task attempt, {name} (CPU)",
                "us",
                statistics.median(values) * 1e6,
                percentile(values, 99) * 1e6,
                {"calls_per_sample": calls},
                len(values),
            )
        )
    return rows


def collect(quick: bool) -> list[Row]:
    steps, runs = (50, 5) if quick else (200, 15)
    rows = asyncio.run(_compare("memory", steps, runs))
    rows += asyncio.run(_compare("sqlite", steps, runs))
    return rows + _hook_rows(200 if quick else 2000)
