"""A send to a run driven in this process, cancelled while it waits for the
run's executor to record its message (memory and SQLite).

The caller heard no outcome, so the message must not be recorded unreported:
if the executor had not taken it yet it is withdrawn (a retry records it and
returns True); if the executor took it, the retry of its key returns True
for it, once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from agentlog.eventlog import EventLog
from agentlog.eventlog.events import MessageSent, RunStatus
from agentlog.runtime import Runtime
from tests.runtime.test_messages import inbox_workflow
from tests.support.fleet import until
from tests.support.runtime import Calls, Gate, config, event_log, events_of, run_to_rest

__all__ = ["event_log"]


async def _sent_keys(log: EventLog, run_id: str) -> list[str]:
    return [e.data.key for e in await events_of(log, run_id) if isinstance(e.data, MessageSent)]


async def _until(check: Callable[[], bool], what: str) -> None:
    async def holds() -> bool:
        return check()

    await until(holds, what, 20.0, every=0.01)  # bounded: a hang fails the test


async def test_a_cancelled_send_not_taken_yet_is_withdrawn(event_log: EventLog) -> None:
    gate = Gate()
    wf = inbox_workflow(Calls(), gate, takes=1)
    async with Runtime(event_log, workflows=[wf], config=config("driver")) as rt:
        await rt.start(wf, run_id="m")
        async with asyncio.timeout(20):
            await gate.reached.wait()  # its step runs: messages wait in the inbox
        executor = rt.driver.active_run("m")
        assert executor is not None
        first = asyncio.create_task(rt.send("m", "a", "a1", idempotency_key="k1"))
        await _until(lambda: len(executor.inbox) == 1, "the message is handed over")
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first
        assert len(executor.inbox) == 0  # withdrawn: nothing will record it
        retry = asyncio.create_task(rt.send("m", "a", "a1", idempotency_key="k1"))
        await _until(lambda: len(executor.inbox) == 1, "the retry is handed over")
        gate.release.set()
        async with asyncio.timeout(20):
            assert await retry is True
        assert await rt.send("m", "a", "a1", idempotency_key="k1") is False
        assert await rt.send("m", "b", "b1") is True
        assert (await run_to_rest(rt, "m")).status == RunStatus.COMPLETED
    assert (await _sent_keys(event_log, "m"))[0] == "k1"
    assert (await _sent_keys(event_log, "m")).count("k1") == 1


async def test_a_send_cancelled_as_its_message_is_recorded_leaves_its_report(
    event_log: EventLog,
) -> None:
    gate = Gate()
    wf = inbox_workflow(Calls(), gate, takes=1)
    async with Runtime(event_log, workflows=[wf], config=config("driver")) as rt:
        await rt.start(wf, run_id="m")
        async with asyncio.timeout(20):
            await gate.reached.wait()
        executor = rt.driver.active_run("m")
        assert executor is not None
        first = asyncio.create_task(rt.send("m", "a", "a1", idempotency_key="k1"))
        await _until(lambda: len(executor.inbox) == 1, "the message is handed over")
        handed = executor.inbox._items[0].future
        handed.add_done_callback(lambda _: first.cancel())  # recorded, then cancelled
        gate.release.set()
        with contextlib.suppress(asyncio.CancelledError):
            await first
        assert first.cancelled()
        assert await _sent_keys(event_log, "m") == ["k1"]  # recorded by the executor
        assert await rt.send("m", "a", "a1", idempotency_key="k1") is True  # its report
        assert await rt.send("m", "a", "a1", idempotency_key="k1") is False
        assert await rt.send("m", "b", "b1") is True
        assert (await run_to_rest(rt, "m")).status == RunStatus.COMPLETED
    assert (await _sent_keys(event_log, "m")).count("k1") == 1
