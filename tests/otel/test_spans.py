"""OpenTelemetry spans and metrics of runs, on the SDK's in-memory exporters.

Each run is one trace: the start's span, then a span per process driving
the run, a span per step attempt and per task attempt under it, and a span
for each interrupt, answer, timer and message recorded. A run resumed by
another runtime continues the same trace (its RunStarted stores the
traceparent). Errors set the span status. The metrics come through the
SDK's InMemoryMetricReader.
"""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import NoOpTracerProvider, StatusCode

from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunStarted
from agentlog.otel import OpenTelemetry, trace_id_of
from agentlog.runtime import RetryPolicy, RunStatus, Runtime, StepContext, Workflow, end, task
from tests.support.otel import Exported
from tests.support.runtime import config, event_log, events_of, run_to_rest

__all__ = ["event_log"]

FLAKY: dict[str, int] = {}


@task(name="charge", retry=RetryPolicy(max_attempts=3, initial_interval=0))
async def charge(cents: int) -> str:
    FLAKY["charge"] = FLAKY.get("charge", 0) + 1
    if FLAKY["charge"] == 1:
        raise ConnectionError("payments hiccup")
    return f"paid {cents}"


def shop() -> Workflow:
    wf = Workflow("shop", state={"receipt": "replace", "ok": "replace"})

    @wf.step(then="approve")
    async def pay(ctx: StepContext) -> Any:
        return {"receipt": await charge(500)}

    @wf.step
    async def approve(ctx: StepContext) -> Any:
        return end(ok=ctx.interrupt("ship it?"))

    return wf


async def until_parked_on_recv(rt: Runtime, run_id: str) -> None:
    async with asyncio.timeout(30):
        while True:
            state = await rt.get_state(run_id)
            if [i["kind"] for i in state.interrupts] == ["message"]:
                return
            await asyncio.sleep(0.02)


def _by_id(spans: list[ReadableSpan]) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in spans if s.context is not None}


def _parent(span: ReadableSpan, spans: list[ReadableSpan]) -> ReadableSpan:
    assert span.parent is not None, span.name
    return _by_id(spans)[span.parent.span_id]


async def test_a_run_its_steps_and_task_attempts_are_spans_of_one_trace(
    event_log: EventLog, exported: Exported
) -> None:
    FLAKY.clear()
    wf = shop()
    async with Runtime(
        event_log, workflows=[wf], config=config(telemetry=exported.telemetry)
    ) as rt:
        await rt.start(wf, run_id="order-1")
        assert (await run_to_rest(rt, "order-1")).status == RunStatus.WAITING
        await rt.resume("order-1", True)
        assert (await run_to_rest(rt, "order-1")).status == RunStatus.COMPLETED
    spans = list(exported.spans.get_finished_spans())
    assert len({s.context.trace_id for s in spans if s.context}) == 1  # one trace
    (start,) = exported.named("agentlog.start")
    runs = exported.named("agentlog.run")
    assert len(runs) == 2  # parked, then driven again after the answer
    assert all(_parent(r, spans) is start for r in runs)
    assert start.attributes is not None and start.attributes["agentlog.run_id"] == "order-1"
    steps = {(s.attributes or {})["agentlog.step"]: s for s in exported.named("agentlog.step")}
    assert set(steps) == {"pay", "approve"}
    pay = steps["pay"]
    assert pay.attributes is not None
    assert pay.attributes["agentlog.workflow"] == "shop"
    assert pay.attributes["agentlog.run_id"] == "order-1"
    assert pay.attributes["agentlog.attempt"] == 1
    tries = exported.named("agentlog.task charge")
    assert [(t.attributes or {})["agentlog.attempt"] for t in tries] == [1, 2]
    keys = {(t.attributes or {})["agentlog.idempotency_key"] for t in tries}
    started = [e.data for e in await events_of(event_log, "order-1")]
    assert keys == {d.key for d in started if type(d).__name__ == "TaskStarted"}
    assert len(keys) == 1  # the same key on every attempt
    assert all(_parent(t, spans) is pay for t in tries)
    assert tries[0].status.status_code == StatusCode.ERROR  # the hiccup
    assert tries[1].status.status_code == StatusCode.UNSET
    assert _parent(pay, spans) in runs
    (interrupt,) = exported.named("agentlog.interrupt")
    assert (interrupt.attributes or {})["agentlog.step"] == "approve"
    assert _parent(interrupt, spans).name == "agentlog.step approve"
    (answer,) = exported.named("agentlog.resume")
    assert _parent(answer, spans) is start  # recorded outside any drive
    first = started[0]
    assert isinstance(first, RunStarted) and "traceparent" in first.limits["trace"]
    state = await rt.get_state("order-1")
    assert start.context is not None
    assert trace_id_of(state) == format(start.context.trace_id, "032x")


async def test_a_run_resumed_by_another_runtime_continues_its_trace(
    event_log: EventLog, exported: Exported
) -> None:
    FLAKY.clear()
    wf = shop()
    other = Exported.create()  # another process's exporter
    try:
        async with Runtime(
            event_log, workflows=[wf], config=config("a", telemetry=exported.telemetry)
        ) as rt:
            await rt.start(wf, run_id="order-2")
            await run_to_rest(rt, "order-2")
        async with Runtime(
            event_log, workflows=[wf], config=config("b", telemetry=other.telemetry)
        ) as rt:
            await rt.resume("order-2", True)
            assert (await run_to_rest(rt, "order-2")).status == RunStatus.COMPLETED
        (start,) = exported.named("agentlog.start")
        (later,) = other.named("agentlog.run")
        assert start.context is not None and later.context is not None
        assert later.context.trace_id == start.context.trace_id
        assert later.parent is not None and later.parent.span_id == start.context.span_id
        assert (later.attributes or {})["agentlog.worker"] == "b"
    finally:
        other.shutdown()


async def test_errors_set_the_span_status(event_log: EventLog, exported: Exported) -> None:
    wf = Workflow("broken", state={"x": "replace"})

    @wf.step(retry=RetryPolicy(max_attempts=1))
    async def boom(ctx: StepContext) -> Any:
        raise ValueError("no such order")

    async with Runtime(
        event_log, workflows=[wf], config=config(telemetry=exported.telemetry)
    ) as rt:
        await rt.start(wf, run_id="bad")
        assert (await run_to_rest(rt, "bad")).status == RunStatus.FAILED
    (step,) = exported.named("agentlog.step boom")
    assert step.status.status_code == StatusCode.ERROR
    assert "ValueError: no such order" in (step.status.description or "")
    assert [e.name for e in step.events] == ["exception"]
    (run,) = exported.named("agentlog.run")
    assert run.status.status_code == StatusCode.ERROR
    assert (run.attributes or {})["agentlog.status"] == RunStatus.FAILED
    assert exported.total("agentlog.runs.failed", workflow="broken") == 1
    assert exported.total("agentlog.step.duration", step="boom", outcome="error") == 1


async def test_timers_and_messages_are_spans(event_log: EventLog, exported: Exported) -> None:
    wf = Workflow("mailbox", state={"got": "replace"})

    @wf.step
    async def wait(ctx: StepContext) -> Any:
        await ctx.sleep(0.05)
        return end(got=await ctx.recv("inbox"))

    cfg = config(telemetry=exported.telemetry, worker=True)
    async with Runtime(event_log, workflows=[wf], config=cfg) as rt:
        await rt.start(wf, run_id="mail")
        await until_parked_on_recv(rt, "mail")  # the timer fired, then recv parked
        await rt.send("mail", "inbox", "hello")
        assert (await run_to_rest(rt, "mail")).status == RunStatus.COMPLETED
    spans = list(exported.spans.get_finished_spans())
    assert len({s.context.trace_id for s in spans if s.context}) == 1
    assert [s.name for s in exported.named("agentlog.message")] == [
        "agentlog.message.sent",
        "agentlog.message.received",
    ]
    (received,) = exported.named("agentlog.message.received")
    assert (received.attributes or {})["agentlog.topic"] == "inbox"
    assert _parent(received, spans).name == "agentlog.step wait"
    kinds = [
        (s.attributes or {})["agentlog.interrupt.kind"]
        for s in exported.named("agentlog.interrupt")
    ]
    assert "timer" in kinds and "message" in kinds


async def test_metrics_count_runs_steps_tasks_and_lease_renewals(
    event_log: EventLog, exported: Exported
) -> None:
    FLAKY.clear()
    wf = shop()
    renewed = asyncio.Event()

    slow = Workflow("slow", state={"x": "replace"})

    @slow.step
    async def hold(ctx: StepContext) -> Any:
        async with asyncio.timeout(30):  # until the heartbeat renewed the lease
            while exported.total("agentlog.lease.renewals", workflow="slow") < 1:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        renewed.set()
        return end(x=1)

    cfg = config(telemetry=exported.telemetry, lease_seconds=0.3)
    async with Runtime(event_log, workflows=[wf, slow], config=cfg) as rt:
        await rt.start(wf, run_id="m1")
        await run_to_rest(rt, "m1")
        await rt.resume("m1", True)
        await run_to_rest(rt, "m1")
        await rt.start(slow, run_id="m2")
        assert (await run_to_rest(rt, "m2")).status == RunStatus.COMPLETED
    assert renewed.is_set()
    assert exported.total("agentlog.runs.started", workflow="shop") == 1
    assert exported.total("agentlog.runs.completed", workflow="shop") == 1
    assert exported.total("agentlog.runs.started", workflow="slow") == 1
    assert exported.total("agentlog.runs.failed") == 0
    assert exported.total("agentlog.step.duration", step="pay", outcome="ok") == 1
    assert exported.total("agentlog.step.duration", step="approve", outcome="interrupted") == 1
    assert exported.total("agentlog.step.duration", step="approve", outcome="ok") == 1
    assert exported.total("agentlog.task.duration", task="charge", outcome="error") == 1
    assert exported.total("agentlog.task.duration", task="charge", outcome="ok") == 1
    assert exported.total("agentlog.runs.in_flight", worker="test") == 0  # all let go
    assert exported.points("agentlog.runs.in_flight")  # but it was counted


async def test_an_untraced_start_stores_no_trace_and_off_reports_nothing(
    event_log: EventLog, exported: Exported
) -> None:
    FLAKY.clear()
    wf = shop()
    untraced = OpenTelemetry(tracer_provider=NoOpTracerProvider())
    async with Runtime(event_log, workflows=[wf], config=config(telemetry=untraced)) as rt:
        await rt.start(wf, run_id="quiet")
        await run_to_rest(rt, "quiet")
    first = (await events_of(event_log, "quiet"))[0].data
    assert isinstance(first, RunStarted) and "trace" not in first.limits
    async with Runtime(event_log, workflows=[wf], config=config(telemetry="off")) as rt:
        assert rt.driver.telemetry is not exported.telemetry
        await rt.resume("quiet", True)
        assert (await run_to_rest(rt, "quiet")).status == RunStatus.COMPLETED
    assert exported.spans.get_finished_spans() == ()
