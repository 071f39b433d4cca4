"""Messages into a run (``rt.send`` / ``ctx.recv``) and values out of it
(``ctx.publish`` / ``rt.get_event``), on memory and SQLite.

A message is an event of the run: kept in order per topic from whenever it
was sent, taken once by a recv whose delivery is recorded, and recorded by
the run's one writer (a parked run's sender claims it; a run driven here
takes it at its next superstep boundary; another process's writer is waited
for on memory, and leaves it in the run's mailbox on SQLite:
test_messages_mailbox.py). A published value is an event too; the latest per key wins.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from agentlog.errors import (
    EventNotPublishedError,
    InvalidMessageError,
    LeaseHeldError,
    NotSerializableError,
    RunEndedError,
    RunNotWaitingError,
    UnknownRunError,
)
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import MessageSent, RunStatus
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.projector import fold
from agentlog.replay import verify_history
from agentlog.runtime import Runtime, StepContext, Workflow, end
from tests.support.runtime import (
    Calls,
    Gate,
    config,
    event_log,
    events_of,
    replay,
    run_to_rest,
    types_of,
)

__all__ = ["event_log"]


def inbox_workflow(calls: Calls, gate: Gate | None = None, takes: int = 2) -> Workflow:
    """ask (an interrupt, so the run parks before it receives), then take
    ``takes`` messages of topic "a" and one of "b"."""
    wf = Workflow("inbox", state={"got": "append", "answer": "replace"})

    @wf.step(then="take")
    async def ask(ctx: StepContext) -> Any:
        if gate is not None:
            await gate.pass_through()
        return {"answer": ctx.interrupt("go?") if gate is None else "gated"}

    @wf.step
    async def take(ctx: StepContext) -> Any:
        calls.hit("take")
        got = [await ctx.recv("a") for _ in range(takes)]
        got.append(await ctx.recv("b"))
        return end(got=got)

    return wf


async def test_messages_sent_before_the_run_waits_are_kept_in_order_per_topic(
    event_log: EventLog,
) -> None:
    calls = Calls()
    wf = inbox_workflow(calls)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="m")
        await run_to_rest(rt, "m")  # parked on its question: it asks for no message yet
        assert await rt.send("m", "a", "a1") is True
        assert await rt.send("m", "b", "b1") is True
        assert await rt.send("m", "a", {"n": 2}) is True
        assert (await rt.get_state("m")).status == RunStatus.WAITING  # still on its question
        await rt.resume("m", "yes")
        state = await run_to_rest(rt, "m")
    assert state.status == RunStatus.COMPLETED
    assert state.values["got"] == ["a1", {"n": 2}, "b1"]
    assert calls.count["take"] == 1  # every message was there: the step never parked
    assert state.inbox == {} and (await replay(event_log, "m")).inbox == {}
    types = await types_of(event_log, "m")
    assert types.count("MessageSent") == 3 and types.count("MessageReceived") == 3


async def test_a_recv_parks_the_run_and_a_send_from_another_runtime_wakes_it(
    event_log: EventLog,
) -> None:
    calls = Calls()
    wf = inbox_workflow(calls, takes=1)
    async with Runtime(event_log, workflows=[wf], config=config("driver")) as rt:
        await rt.start(wf, run_id="m")
        await run_to_rest(rt, "m")
        await rt.resume("m", "yes")
        parked = await run_to_rest(rt, "m")  # waits on recv("a"): a park wait returns on
        assert parked.status == RunStatus.WAITING
        assert [i["kind"] for i in parked.interrupts] == ["message"]
        assert await rt.pending("m") == []  # not a question for a human
        with pytest.raises(RunNotWaitingError, match=r"waits for a message on \['a'\]"):
            await rt.resume("m", "an answer")
        info = await event_log.get_run("m")
        assert info.status == RunStatus.WAITING and info.lease_expires_at is None
    async with Runtime(event_log, workflows=[wf], config=config("sender")) as other:
        await other.send("m", "a", "a1")
        assert (await event_log.get_run("m")).status == RunStatus.RUNNING  # it goes on
        await other.send("m", "b", "b1")
        state = await run_to_rest(other, "m")
    assert state.status == RunStatus.COMPLETED
    assert state.values["got"] == ["a1", "b1"]
    sent = [e.data for e in await events_of(event_log, "m") if isinstance(e.data, MessageSent)]
    assert sent[0].wakes == parked.interrupts[0]["id"]  # it answered the parked recv


async def test_a_send_with_the_same_idempotency_key_is_stored_once(event_log: EventLog) -> None:
    wf = inbox_workflow(Calls())
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="m")
        await run_to_rest(rt, "m")
        assert await rt.send("m", "a", "once", idempotency_key="k1") is True
        before = await types_of(event_log, "m")
        assert await rt.send("m", "a", "twice", idempotency_key="k1") is False
        assert await types_of(event_log, "m") == before  # nothing appended, no claim either
        assert await rt.send("m", "a", "other", idempotency_key="k2") is True
        state = await rt.get_state("m")
    assert [m["value"] for m in state.inbox["a"]] == ["once", "other"]
    assert set(state.message_keys) == {"k1", "k2"}


async def test_bad_sends_raise_typed_errors_and_record_nothing(event_log: EventLog) -> None:
    wf = inbox_workflow(Calls())
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        with pytest.raises(UnknownRunError):
            await rt.send("nobody", "a", 1)
        await rt.start(wf, run_id="m")
        await run_to_rest(rt, "m")
        before = await types_of(event_log, "m")
        with pytest.raises(InvalidMessageError, match="topic"):
            await rt.send("m", "", 1)
        with pytest.raises(InvalidMessageError, match="topic"):
            await rt.send("m", "t" * 300, 1)
        with pytest.raises(InvalidMessageError, match="idempotency key"):
            await rt.send("m", "a", 1, idempotency_key="")
        with pytest.raises(NotSerializableError):
            await rt.send("m", "a", object())
        assert await types_of(event_log, "m") == before
        await rt.cancel("m")
        with pytest.raises(RunEndedError, match="cancelled"):
            await rt.send("m", "a", 1)
        with pytest.raises(InvalidMessageError, match="key"):
            await rt.get_event("m", "")


async def test_a_recv_timeout_returns_none_once_a_worker_fires_it(event_log: EventLog) -> None:
    wf = Workflow("timeout", state={"got": "replace"})

    @wf.step
    async def wait_for_it(ctx: StepContext) -> Any:
        return end(got=[await ctx.recv("never", timeout=timedelta(seconds=0.2))])

    async with Runtime(event_log, workflows=[wf], config=config(worker=True)) as rt:
        await rt.start(wf, run_id="t")
        parked = await run_to_rest(rt, "t")
        if parked.status == RunStatus.WAITING:  # settled on its recv; the worker fires it
            info = await event_log.get_run("t")
            assert info.wake_at is not None
            async with asyncio.timeout(20):
                while (await rt.get_state("t")).status != RunStatus.COMPLETED:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
        state = await rt.get_state("t")
    assert state.status == RunStatus.COMPLETED and state.values == {"got": [None]}
    assert (await types_of(event_log, "t")).count("TimerFired") == 1


async def test_a_message_sent_while_a_step_runs_is_kept_for_a_later_recv(
    event_log: EventLog,
) -> None:
    """Sent to a run driven here while its step runs (not waiting): the
    executor records it at the superstep boundary, and the recv takes it."""
    calls, gate = Calls(), Gate()
    wf = inbox_workflow(calls, gate, takes=1)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="m")
        async with asyncio.timeout(20):
            await gate.reached.wait()
        sending = asyncio.create_task(rt.send("m", "a", "during the step"))
        other = asyncio.create_task(rt.send("m", "b", "b1"))
        executor = rt.driver.active_run("m")
        assert executor is not None
        async with asyncio.timeout(20):  # both handed over while the step still runs
            while len(executor.inbox) < 2:  # noqa: ASYNC110 - polls the hand-over
                await asyncio.sleep(0.01)
        assert not sending.done() and not gate.release.is_set()
        gate.release.set()
        async with asyncio.timeout(20):
            assert await sending is True and await other is True
        state = await run_to_rest(rt, "m")
    assert state.status == RunStatus.COMPLETED
    assert state.values["got"] == ["during the step", "b1"]
    assert calls.count["take"] == 1
    # Recorded between two supersteps by the executor itself: a replay agrees.
    assert await verify_history(wf, await events_of(event_log, "m")) == []


async def test_a_retried_step_gets_the_same_message_and_a_later_recv_the_next(
    event_log: EventLog,
) -> None:
    wf = Workflow("retry", state={"got": "append"})
    attempts = Calls()

    @wf.step(then="take")
    async def ask(ctx: StepContext) -> Any:
        ctx.interrupt("go?")  # parks first, so every message is sent before a recv

    @wf.step
    async def take(ctx: StepContext) -> Any:
        first = await ctx.recv("a")
        if attempts.hit("take") == 1:
            raise RuntimeError("flaky after the first recv")
        second = await ctx.recv("a")
        return end(got=[first, second])

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="r")
        await run_to_rest(rt, "r")
        for n in (1, 2, 3):
            await rt.send("r", "a", n)
        await rt.resume("r", "go")
        state = await run_to_rest(rt, "r")
    assert state.status == RunStatus.COMPLETED
    assert attempts.count["take"] == 2
    assert state.values["got"] == [1, 2]  # the retry got 1 again, then 2
    assert [m["value"] for m in state.inbox["a"]] == [3]  # kept for a later recv
    assert (await types_of(event_log, "r")).count("MessageReceived") == 2


async def test_get_event_tells_a_published_none_from_no_value(event_log: EventLog) -> None:
    wf = Workflow("nothing", state={"done": "replace"})

    @wf.step
    async def work(ctx: StepContext) -> Any:
        await ctx.publish("answer", None)  # a value: "no answer", published
        return end(done=True)

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="n")
        await run_to_rest(rt, "n")
        assert await rt.get_event("n", "answer", timeout=0) is None  # published None
        assert await rt.get_event("n", "answer", default="unset") is None
        with pytest.raises(EventNotPublishedError, match="'other'"):
            await rt.get_event("n", "other", timeout=timedelta(seconds=5))


def publisher(calls: Calls, gate: Gate) -> Workflow:
    wf = Workflow("publisher", state={"done": "replace"})

    @wf.step
    async def work(ctx: StepContext) -> Any:
        await ctx.publish("status", "starting")
        await gate.pass_through()
        await ctx.publish("status", "half way")
        await ctx.publish("result", {"n": 42})
        if calls.hit("work") == 1:
            raise RuntimeError("retried: publishes again")
        return end(done=True)

    return wf


async def test_get_event_waits_for_the_value_and_the_latest_wins(event_log: EventLog) -> None:
    calls, gate = Calls(), Gate()
    wf = publisher(calls, gate)
    async with Runtime(event_log, workflows=[wf], config=config(durability="sync")) as rt:
        await rt.start(wf, run_id="p")
        async with asyncio.timeout(20):
            await gate.reached.wait()
        assert await rt.get_event("p", "status") == "starting"
        with pytest.raises(EventNotPublishedError) as timed_out:  # not yet
            await rt.get_event("p", "result", timeout=0)
        assert (timed_out.value.run_id, timed_out.value.key) == ("p", "result")
        assert not timed_out.value.ended
        assert await rt.get_event("p", "result", timeout=0, default="none yet") == "none yet"
        waiting = asyncio.create_task(rt.get_event("p", "result", timeout=20))
        await asyncio.sleep(0)
        assert not waiting.done()
        gate.release.set()
        assert await waiting == {"n": 42}
        state = await run_to_rest(rt, "p")
        assert await rt.get_event("p", "status") == "half way"  # the latest value
        with pytest.raises(EventNotPublishedError) as never:  # the run ended without it
            await rt.get_event("p", "missing")
        assert never.value.ended
        assert await rt.get_event("p", "missing", default=None) is None
    assert state.published == {"status": "half way", "result": {"n": 42}}
    assert calls.count["work"] == 2
    # The retried step published nothing again: each publish call once.
    assert (await types_of(event_log, "p")).count("ValuePublished") == 3
    updates = [u async for u in rt.stream("p")]
    assert [u.data for u in updates if u.type == "ValuePublished"] == [
        {"status": "starting"},
        {"status": "half way"},
        {"result": {"n": 42}},
    ]


async def test_a_run_with_messages_replays_forks_and_verifies(event_log: EventLog) -> None:
    calls = Calls()
    wf = inbox_workflow(calls)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="m")
        await run_to_rest(rt, "m")
        await rt.send("m", "a", "a1")
        await rt.resume("m", "yes")
        await run_to_rest(rt, "m")  # parked on its second recv("a")
        await rt.send("m", "a", "a2")
        await rt.send("m", "b", "b1", idempotency_key="b")
        state = await run_to_rest(rt, "m")
        assert state.status == RunStatus.COMPLETED
        events = await events_of(event_log, "m")
        assert fold(events).to_dict() == state.to_dict()  # the projector folds the same state
        assert await verify_history(wf, events) == []
        # A fork before the last message: it waits on recv("a") again.
        at = next(e.seq for e in events if isinstance(e.data, MessageSent) and e.data.value == "a2")
        await rt.fork("m", at_seq=at - 1, new_run_id="m2")
        forked = await run_to_rest(rt, "m2")
        assert forked.status == RunStatus.WAITING
        assert [r["value"] for r in forked.received.values()] == ["a1"]  # its first recv
        await rt.send("m2", "a", "other a2")
        await rt.send("m2", "b", "b1")
        done = await run_to_rest(rt, "m2")
    assert done.values["got"] == ["a1", "other a2", "b1"]
    assert state.values["got"] == ["a1", "a2", "b1"]


async def test_a_send_waits_while_another_writer_holds_the_run_up_to_its_timeout() -> None:
    """On a log with no mailbox (memory), another runtime drives the run: the
    sender waits for its writer to let go; past ``timeout`` it raises, having
    recorded nothing, so the same send again returns True. (SQLite, PostgreSQL
    and Redis store it in the run's mailbox and return at once:
    tests/runtime/test_messages_mailbox.py.)"""
    event_log = MemoryEventLog()
    calls, gate = Calls(), Gate()
    wf = inbox_workflow(calls, gate, takes=1)
    async with Runtime(event_log, workflows=[wf], config=config("driver")) as driver:
        await driver.start(wf, run_id="m")
        async with asyncio.timeout(20):
            await gate.reached.wait()  # its step runs; the driver holds the run
        async with Runtime(event_log, workflows=[wf], config=config("sender")) as sender:
            before = await types_of(event_log, "m")
            with pytest.raises(LeaseHeldError):
                await sender.send("m", "a", "a1", idempotency_key="a1", timeout=0.2)
            assert await types_of(event_log, "m") == before
            sending = asyncio.create_task(sender.send("m", "a", "a1", idempotency_key="a1"))
            gate.release.set()  # the run goes on and parks on its recv: the sender gets in
            async with asyncio.timeout(20):
                assert await sending is True
            await sender.send("m", "b", "b1")
            state = await run_to_rest(sender, "m")
    assert state.status == RunStatus.COMPLETED and state.values["got"] == ["a1", "b1"]
    assert await verify_history(wf, await events_of(event_log, "m")) == []
