"""The public API of issue 9: structured parallel tasks, @task options, step timeouts, routes."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import Annotated, Any, TypedDict

import pytest

from agentlog.errors import (
    ConfigError,
    InvalidResumeValueError,
    InvalidRouteError,
    NondeterminismError,
    RunFailedError,
    WorkflowDefinitionError,
    WorkflowError,
)
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunStatus
from agentlog.projector import load_state
from agentlog.runtime import (
    RetryPolicy,
    Runtime,
    Send,
    StepContext,
    Workflow,
    current_idempotency_key,
    end,
    goto,
    task,
)
from tests.support.runtime import FAST_RETRY, Calls, config, event_log, run_to_rest, types_of

__all__ = ["event_log"]


def _siblings(calls: Calls, gather: str, *, interrupt: bool = False) -> Workflow:
    """A step running slow() and a sibling that fails once (or interrupts) side by side."""
    wf = Workflow(f"sib-{gather}-{interrupt}", state={"out": "replace"}, retry=FAST_RETRY)
    slow_started, retried = asyncio.Event(), asyncio.Event()

    async def slow() -> str:
        if calls.hit("slow") == 1:
            slow_started.set()
            # Still running when the sibling gives up. Without structure the
            # step is retried now, and its retry runs slow() again; with it,
            # no retry can start before this call is recorded, so it waits
            # out the bound below (a hang guard, not a timing assumption).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(retried.wait(), 0.5)
        return "slow done"

    async def fails_once() -> str:
        await slow_started.wait()
        if calls.hit("fails_once") == 1:
            raise RuntimeError("flaky tool")
        return "ok"

    @wf.step
    async def work(ctx: StepContext) -> Any:
        if ctx.attempt > 1:
            retried.set()

        async def other() -> str:
            if interrupt:
                await slow_started.wait()
                return str(ctx.interrupt("approve?"))
            return await ctx.task("fails_once", fails_once)

        calls_ = (ctx.task("slow", slow), other())
        results = await (ctx.gather(*calls_) if gather == "ctx" else asyncio.gather(*calls_))
        return end(out=list(results))

    return wf


@pytest.mark.parametrize("gather", ["ctx", "asyncio"])
async def test_a_failing_sibling_never_makes_an_effect_run_twice(
    event_log: EventLog, gather: str
) -> None:
    calls = Calls()
    wf = _siblings(calls, gather)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="g", durability="sync")
        final = await run_to_rest(rt, "g")
    assert final.status == RunStatus.COMPLETED
    assert final.values["out"] == ["slow done", "ok"]
    assert calls.count["slow"] == 1  # recorded before the retry, so not run again
    types = await types_of(event_log, "g")
    assert types.index("TaskCompleted") < types.index("StepFailed")


@pytest.mark.parametrize("gather", ["ctx", "asyncio"])
async def test_a_sibling_that_interrupts_lets_the_other_finish_and_record(
    event_log: EventLog, gather: str
) -> None:
    calls = Calls()
    wf = _siblings(calls, gather, interrupt=True)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="i", durability="sync")
        parked = await run_to_rest(rt, "i")
        assert parked.status == RunStatus.WAITING
        types = await types_of(event_log, "i")
        assert types.index("TaskCompleted") < types.index("InterruptRaised")
        await rt.resume("i", "yes")
        final = await run_to_rest(rt, "i")
    assert final.values["out"] == ["slow done", "yes"]
    assert calls.count["slow"] == 1


async def test_task_decorator_retries_times_out_and_keeps_its_key(event_log: EventLog) -> None:
    calls = Calls()
    keys: list[str] = []

    @task(name="charge", retry=RetryPolicy(max_attempts=3, initial_interval=0))
    async def charge(cents: int) -> str:
        keys.append(current_idempotency_key())
        if calls.hit("charge") < 3:
            raise ConnectionError("gateway hiccup")
        return f"charged {cents}"

    @task(timeout=0.01, retry=RetryPolicy(max_attempts=2, initial_interval=0))
    async def hangs() -> str:
        calls.hit("hangs")
        await asyncio.Event().wait()
        return "never"

    wf = Workflow("pay", state={"receipt": "replace", "hung": "replace"})

    @wf.step
    async def pay(ctx: StepContext) -> Any:
        receipt = await charge(500)
        try:
            await hangs()
        except TimeoutError:
            return end(receipt=receipt, hung=True)
        return end(receipt=receipt, hung=False)

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="p", durability="sync")
        final = await run_to_rest(rt, "p")
    assert final.values == {"receipt": "charged 500", "hung": True}
    assert calls.count == {"charge": 3, "hangs": 2}
    assert len(set(keys)) == 1  # one idempotency key across the task's own retries
    types = await types_of(event_log, "p")
    assert types.count("TaskFailed") == 4 and "StepFailed" not in types
    with pytest.raises(WorkflowError, match="outside a step"):
        await charge(1)


async def test_a_step_timeout_fails_a_hung_attempt_and_retries(event_log: EventLog) -> None:
    calls = Calls()
    wf = Workflow("hung", state={"x": "replace"}, retry=FAST_RETRY)

    @wf.step(timeout=0.05)
    async def model_call(ctx: StepContext) -> Any:
        if calls.hit("model") == 1:
            await asyncio.Event().wait()  # the first call hangs for good
        return end(x=1)

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="t", durability="sync")
        final = await run_to_rest(rt, "t")
    assert final.values == {"x": 1} and calls.count["model"] == 2
    failed = [e.data for e in await _events(event_log, "t") if e.type == "StepFailed"]
    assert len(failed) == 1 and "took longer than 0.05s" in failed[0].error


async def _events(log: EventLog, run_id: str) -> list[Any]:
    return [e async for e in log.read(run_id)]


async def test_routes_take_step_functions_are_checked_and_drawn(event_log: EventLog) -> None:
    wf = Workflow("router", state={"path": "append"}, start="decide")

    @wf.step
    async def finish(ctx: StepContext) -> Any:
        return end(path=["finish"])

    @wf.step(routes=[finish, "review"])
    async def decide(ctx: StepContext) -> Any:
        return goto(finish if ctx.run_id == "ok" else "nowhere-declared", path=["decide"])

    @wf.step(then=finish)
    async def review(ctx: StepContext) -> Any:
        return {"path": ["review"]}

    wf.validate()
    assert wf.steps["decide"].routes == ("finish", "review")
    assert wf.steps["review"].then == ("finish",)
    chart = wf.mermaid()
    assert "decide -.-> finish" in chart and "review --> finish" in chart
    assert chart.startswith("flowchart TD")
    with pytest.raises(InvalidRouteError, match="at least one step"):
        goto()
    async with Runtime(event_log, config=config()) as rt:
        rt.register(wf)
        await rt.start("router", run_id="ok", durability="sync")
        assert (await run_to_rest(rt, "ok")).values["path"] == ["decide", "finish"]


async def test_undeclared_route_is_refused(event_log: EventLog) -> None:
    wf = Workflow("strict", state={"x": "replace"})

    @wf.step(routes=["b"])
    async def a(ctx: StepContext) -> Any:
        return goto("c")

    @wf.step
    async def b(ctx: StepContext) -> Any:
        return end(x=1)

    @wf.step
    async def c(ctx: StepContext) -> Any:
        return end(x=2)

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="r", durability="sync")
        with pytest.raises(RunFailedError, match=r"InvalidRouteError: .*declared routes"):
            await rt.wait("r", timeout=20)


def test_definition_errors() -> None:
    wf = Workflow("defs")

    async def stranger(ctx: StepContext) -> Any:
        return None

    @wf.step(routes=[stranger])
    async def a(ctx: StepContext) -> Any:
        return None

    with pytest.raises(WorkflowDefinitionError, match="not a step of workflow"):
        wf.validate()
    with pytest.raises(WorkflowDefinitionError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(WorkflowDefinitionError, match="timeout"):
        task(timeout=0)


def test_retry_policy_backoff_and_non_retryable() -> None:
    policy = RetryPolicy(
        max_attempts=5, initial_interval=1, backoff_coefficient=3, max_interval=5,
        non_retryable=(KeyError,),
    )  # fmt: skip
    assert [policy.delay(a) for a in (1, 2, 3)] == [1, 3, 5]
    assert policy.retries(ValueError(), 4) and not policy.retries(ValueError(), 5)
    assert not policy.retries(KeyError(), 1)
    jittered = RetryPolicy(initial_interval=1, jitter=True)
    assert all(0.5 <= jittered.delay(1) <= 1.5 for _ in range(50))


@dataclasses.dataclass
class Approval:
    approved: bool
    note: str


class Ticket(TypedDict):
    approved: bool
    reviewers: list[str]


async def test_expects_takes_python_types_and_refuses_typos(event_log: EventLog) -> None:
    wf = Workflow("approve", state={"got": "replace", "ticket": "replace"})

    @wf.step(then="second")
    async def first(ctx: StepContext) -> Any:
        answer = ctx.interrupt("charge the card?", expects=Approval)
        assert isinstance(answer, Approval)  # built from the stored answer
        return {"got": dataclasses.asdict(answer)}

    @wf.step
    async def second(ctx: StepContext) -> Any:
        return end(ticket=ctx.interrupt("ticket?", expects=Ticket))

    typo = Workflow("typo", state={"ok": "replace"})

    @typo.step
    async def ask(ctx: StepContext) -> Any:
        return end(ok=ctx.interrupt("delete prod?", expects={"approved": "boolean"}))

    async with Runtime(event_log, workflows=[wf, typo], config=config()) as rt:
        await rt.start(wf, run_id="a", durability="sync")
        assert (await run_to_rest(rt, "a")).interrupts[0]["expects"] == {
            "approved": "bool",
            "note": "str",
        }
        with pytest.raises(InvalidResumeValueError, match="approved"):
            await rt.resume("a", {"approved": "no", "note": "typo'd yes"})
        await rt.resume("a", {"approved": True, "note": "ok"})
        await run_to_rest(rt, "a")
        with pytest.raises(InvalidResumeValueError, match="reviewers"):
            await rt.resume("a", {"approved": True, "reviewers": "ann"})
        await rt.resume("a", {"approved": True, "reviewers": ["ann"]})
        final = await run_to_rest(rt, "a")
        assert final.values == {
            "got": {"approved": True, "note": "ok"},
            "ticket": {"approved": True, "reviewers": ["ann"]},
        }
        await rt.start(typo, run_id="t", durability="sync")
        with pytest.raises(RunFailedError, match="'boolean' is not a type name"):
            await rt.wait("t", timeout=20)
    assert "InterruptRaised" not in await types_of(event_log, "t")  # never parked


def _checkout(calls: Calls, charge_name: str) -> Workflow:
    wf = Workflow("checkout", state={"receipt": "replace", "ok": "replace"})

    @wf.step
    async def pay(ctx: StepContext) -> Any:
        receipt = await ctx.task(charge_name, lambda: calls.hit("charge") and "rcpt-1")
        ok = ctx.interrupt("ship it?", expects=bool)
        return end(receipt=receipt, ok=ok)

    return wf


async def test_a_renamed_task_never_charges_twice(event_log: EventLog) -> None:
    calls = Calls()
    old = _checkout(calls, "payments.charge")
    async with Runtime(event_log, workflows=[old], config=config("v1")) as rt:
        await rt.start(old, run_id="c", durability="sync")
        assert (await run_to_rest(rt, "c")).status == RunStatus.WAITING
    renamed = _checkout(calls, "stripe.charge")  # a deploy renames the task
    async with Runtime(event_log, workflows=[renamed], config=config("v2")) as rt:
        await rt.resume("c", True)
        with pytest.raises(NondeterminismError, match=r"'stripe.charge'.*'payments.charge'"):
            await rt.wait("c", timeout=20)
    assert calls.count["charge"] == 1
    async with Runtime(event_log, workflows=[old], config=config("fixed")) as rt:
        assert (await rt.recover()).recovered == ["c"]
        assert (await run_to_rest(rt, "c")).values == {"receipt": "rcpt-1", "ok": True}
    assert calls.count["charge"] == 1


def test_the_fingerprint_covers_the_step_graph() -> None:
    def build(then: str) -> Workflow:
        wf = Workflow("graph", state={"x": "replace"})

        @wf.step(then=then)
        async def a(ctx: StepContext) -> Any:
            return None

        @wf.step
        async def b(ctx: StepContext) -> Any:
            return None

        @wf.step
        async def c(ctx: StepContext) -> Any:
            return None

        return wf

    to_b, to_c = build("b"), build("c")
    assert to_b.fingerprint != to_c.fingerprint
    assert to_b.fingerprints[1] == to_c.fingerprints[1]  # the edge-blind legacy one


async def test_send_fans_out_over_a_dynamic_list(event_log: EventLog) -> None:
    calls = Calls()
    wf = Workflow("fanout", state={"topics": "replace", "hits": "append"}, retry=FAST_RETRY)

    @wf.step
    async def plan(ctx: StepContext) -> Any:
        return goto(*(Send(search, topic=t) for t in ctx.state["topics"]))

    @wf.step(then="summarize")
    async def search(ctx: StepContext) -> Any:
        topic = ctx.input["topic"]
        hit = await ctx.task("web.search", lambda: calls.hit(topic) and f"hit:{topic}")
        if topic == "b" and calls.hit("b-step") == 1:
            raise ConnectionError("flaky after its task")  # this branch alone runs again
        return {"hits": [hit]}

    @wf.step
    async def summarize(ctx: StepContext) -> Any:
        return end(hits=[f"{len(ctx.state['hits'])} hits"])

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="f", input={"topics": ["a", "b", "c"]}, durability="sync")
        final = await run_to_rest(rt, "f")
    assert final.values["hits"] == ["hit:a", "hit:b", "hit:c", "3 hits"]
    assert [calls.count[t] for t in "abc"] == [1, 1, 1]  # recorded searches never re-ran
    assert calls.count["b-step"] == 2
    replayed = await load_state(event_log, "f", use_snapshots=False)
    assert replayed.values == final.values


async def test_ctx_state_is_read_only_at_every_depth_and_results_are_snapshots(
    event_log: EventLog,
) -> None:
    wf = Workflow("ro", state={"msgs": "append", "meta": "merge", "t": "replace"})
    errors: list[str] = []

    @wf.step(then="second")
    async def first(ctx: StepContext) -> Any:
        pair = await ctx.task("pair", lambda: (1, 2))
        assert pair == [1, 2]  # live, as on every replay: a tuple is stored as a list
        return {"msgs": [{"role": "user", "parts": ["hi"]}], "meta": {"n": 1}, "t": pair}

    @wf.step
    async def second(ctx: StepContext) -> Any:
        for mutate in (
            lambda: ctx.state["msgs"].append("x"),  # type: ignore[attr-defined]
            lambda: ctx.state["msgs"][0]["parts"].append("x"),
            lambda: ctx.state["meta"].update(n=2),  # type: ignore[attr-defined]
            lambda: ctx.state.__setitem__("t", 0),  # type: ignore[attr-defined]
        ):
            try:
                mutate()
            except (TypeError, AttributeError) as exc:
                errors.append(type(exc).__name__)
        history = ctx.state["msgs"] + [{"role": "assistant"}]  # a new list, as with a list
        return end(msgs=history[-1:], t=ctx.state["msgs"][0])  # a view is written back as is

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="r", durability="sync")
        final = await run_to_rest(rt, "r")
        final.values["msgs"].append("changed by the caller")
        again = await rt.get_state("r")
    assert len(errors) == 4
    assert again.values["msgs"] == [{"role": "user", "parts": ["hi"]}, {"role": "assistant"}]
    assert again.values["t"] == {"role": "user", "parts": ["hi"]}
    assert again.to_dict() == (await load_state(event_log, "r", use_snapshots=False)).to_dict()


async def test_reducers_belong_to_their_workflow(event_log: EventLog) -> None:
    def build(sep: str) -> Workflow:
        def join(current: Any, update: Any) -> Any:  # the same name each time it is built
            return update if current is None else f"{current}{sep}{update}"

        wf = Workflow("joiner", state={"text": join})

        @wf.step(then="second")
        async def first(ctx: StepContext) -> Any:
            return {"text": "a"}

        @wf.step
        async def second(ctx: StepContext) -> Any:
            return {"text": "b"}

        return wf

    dash, plus = build("-"), build("+")  # built twice, as in a fixture: no clash
    for run_id, wf in (("d", dash), ("p", plus)):
        async with Runtime(event_log, workflows=[wf], config=config()) as rt:
            await rt.start(wf, run_id=run_id, durability="sync")
            assert (await run_to_rest(rt, run_id)).values[
                "text"
            ] == f"a{'-' if wf is dash else '+'}b"


class Research(TypedDict):
    topic: str
    notes: Annotated[list[str], "append"]


async def test_a_typeddict_state_declares_keys_and_reducers(event_log: EventLog) -> None:
    wf = Workflow("typed", state=Research)
    assert wf.reducers == {"topic": "replace", "notes": "append"}

    @wf.step(then="second")
    async def first(ctx: StepContext[Research]) -> Any:
        return {"notes": [f"on {ctx.state['topic']}"]}

    @wf.step
    async def second(ctx: StepContext[Research]) -> Any:
        return end(notes=["more"])

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        with pytest.raises(ConfigError, match="not in the state"):
            await rt.start(wf, run_id="t", input={"topik": "typo"})
        await rt.start(wf, run_id="t", input={"topic": "x"}, durability="sync")
        assert (await run_to_rest(rt, "t")).values == {"topic": "x", "notes": ["on x", "more"]}
    with pytest.raises(WorkflowDefinitionError, match="TypedDict"):
        Workflow("bad", state=int)


async def test_expects_takes_a_pydantic_model(event_log: EventLog) -> None:
    import pydantic  # a dev dependency

    class Review(pydantic.BaseModel):
        approved: bool
        score: int

    wf = Workflow("pyd", state={"review": "replace"})

    @wf.step
    async def ask(ctx: StepContext) -> Any:
        review = ctx.interrupt("review?", expects=Review)
        assert isinstance(review, Review)
        return end(review=review.model_dump())

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="p", durability="sync")
        await run_to_rest(rt, "p")
        with pytest.raises(InvalidResumeValueError, match="score"):
            await rt.resume("p", {"approved": True, "score": "high"})
        await rt.resume("p", {"approved": True, "score": 5})
        assert (await run_to_rest(rt, "p")).values["review"] == {"approved": True, "score": 5}
