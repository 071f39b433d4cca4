"""A send to a run that another process drives returns at once (issue 24, item 1).

On SQLite (and PostgreSQL and Redis: tests/contract/test_messages_backends.py)
the sender stores the message in the run's mailbox, and the run's writer
moves it into the history before the run parks or ends, in the order sent,
once per idempotency key. The driver and the sender are two runtimes on one
file, as two processes would be (tests/crash/test_crash_messages.py has real
processes).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentlog.eventlog.events import MessageSent, RunStatus
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.replay import verify_history
from agentlog.runtime import Runtime
from tests.runtime.test_messages import inbox_workflow
from tests.support.fleet import until
from tests.support.runtime import Calls, Gate, config, events_of, run_to_rest, types_of


async def test_a_send_while_another_process_holds_the_run_returns_at_once(
    tmp_path: Path,
) -> None:
    calls, gate = Calls(), Gate()
    wf = inbox_workflow(calls, gate, takes=2)
    async with SqliteEventLog(tmp_path / "agentlog.db") as log:
        async with Runtime(log, workflows=[wf], config=config("driver")) as driver:
            await driver.start(wf, run_id="m")
            async with asyncio.timeout(20):
                await gate.reached.wait()  # its step runs: the driver holds the run
            async with Runtime(log, workflows=[wf], config=config("sender")) as sender:
                before = await types_of(log, "m")
                async with asyncio.timeout(20):  # the step is still held at its gate
                    assert await sender.send("m", "a", "a1", idempotency_key="k1") is True
                    assert await sender.send("m", "b", "b1", idempotency_key="k3") is True
                    assert await sender.send("m", "a", "a2", idempotency_key="k2") is True
                    assert await sender.send("m", "a", "again", idempotency_key="k1") is False
                    assert await sender.send("m", "a", "a3") is True  # no key: stored too
                assert await types_of(log, "m") == before  # in the mailbox, not the history
                gate.release.set()
                state = await run_to_rest(driver, "m")
        events = await events_of(log, "m")
    assert state.status == RunStatus.COMPLETED
    assert state.values["got"] == ["a1", "a2", "b1"]  # in order per topic
    sent = [e.data for e in events if isinstance(e.data, MessageSent)]
    assert [(m.topic, m.value) for m in sent] == [
        ("a", "a1"),
        ("b", "b1"),
        ("a", "a2"),
        ("a", "a3"),
    ]
    assert [m.key for m in sent][:3] == ["k1", "k3", "k2"] and sent[3].key  # each once
    assert await verify_history(wf, events) == []


async def test_a_message_stored_as_the_writer_parks_is_recorded_by_its_sender(
    tmp_path: Path,
) -> None:
    """The writer closed its mailbox (it parks): a message stored after that is
    not the writer's to move; its sender waits for the writer to let go, claims
    the run and records it, and the run goes on."""
    calls = Calls()
    wf = inbox_workflow(calls, takes=1)
    async with SqliteEventLog(tmp_path / "agentlog.db") as log:
        async with Runtime(log, workflows=[wf], config=config("driver")) as driver:
            await driver.start(wf, run_id="m")
            await run_to_rest(driver, "m")  # parked on its question
            await driver.resume("m", "yes")
            assert (await run_to_rest(driver, "m")).status == RunStatus.WAITING  # on recv("a")
            # As if a sender stored it after the park's close: the mailbox holds
            # it, and no writer will take it.
            stored = await log.store_message("m", "a", "late", "k-late")
            assert stored.inserted and not stored.taken
            async with Runtime(log, workflows=[wf], config=config("sender")) as sender:
                assert await sender.send("m", "b", "b1", idempotency_key="k-b") is True
                state = await run_to_rest(sender, "m")
        events = await events_of(log, "m")
    assert state.status == RunStatus.COMPLETED and state.values["got"] == ["late", "b1"]
    sent = [e.data.key for e in events if isinstance(e.data, MessageSent)]
    assert sent == ["k-late", "k-b"]  # the older stored message first
    assert await log_messages_left(tmp_path) == []


async def log_messages_left(tmp_path: Path) -> list[object]:
    async with SqliteEventLog(tmp_path / "agentlog.db") as log:
        return list(await log.stored_messages("m"))


async def test_a_run_cancelled_during_a_step_records_the_messages_stored_for_it(
    tmp_path: Path,
) -> None:
    """A cancel that ends the run inside a superstep is an end like the others:
    the writer moves what was stored for it first, so a send that returned True
    is in the history."""
    gate = Gate()
    wf = inbox_workflow(Calls(), gate, takes=1)
    async with SqliteEventLog(tmp_path / "agentlog.db") as log:
        async with Runtime(log, workflows=[wf], config=config("driver")) as driver:
            await driver.start(wf, run_id="m")
            async with asyncio.timeout(20):
                await gate.reached.wait()  # its step runs: the driver holds the run
            async with Runtime(log, workflows=[wf], config=config("sender")) as sender:
                assert await sender.send("m", "a", "a1", idempotency_key="k1") is True
            state = await driver.cancel("m")
        events = await events_of(log, "m")
        left = await log.stored_messages("m")
    assert state.status == RunStatus.CANCELLED
    assert [e.data.key for e in events if isinstance(e.data, MessageSent)] == ["k1"]
    assert left == []


async def test_a_send_to_a_run_driven_here_reports_a_message_whose_send_raised(
    tmp_path: Path,
) -> None:
    """Another process's send stored k1 and raised (LeaseHeldError: it marked
    k1 unreported). The retry reaches the process that drives the run now, so
    it hands k1 to the executor instead of the mailbox: it returns True, and
    no later send of k1 does, here or from another process."""
    gate = Gate()
    wf = inbox_workflow(Calls(), gate, takes=1)
    async with SqliteEventLog(tmp_path / "agentlog.db") as log:
        async with Runtime(log, workflows=[wf], config=config("driver")) as driver:
            await driver.start(wf, run_id="m")
            async with asyncio.timeout(20):
                await gate.reached.wait()  # its step runs: the driver holds the run
            assert (await log.store_message("m", "a", "a1", "k1")).reports
            await log.unreport("m", "k1")  # as the send that stored it does when it raises
            retry = asyncio.create_task(driver.send("m", "a", "a1", idempotency_key="k1"))
            gate.release.set()
            async with asyncio.timeout(20):
                assert await retry is True
            assert await driver.send("m", "a", "a1", idempotency_key="k1") is False
            assert (await run_to_rest(driver, "m")).status == RunStatus.WAITING  # on "b"
            async with Runtime(log, workflows=[wf], config=config("sender")) as sender:
                assert await sender.send("m", "a", "a1", idempotency_key="k1") is False
            assert await driver.send("m", "b", "b1") is True
            state = await run_to_rest(driver, "m")
        events = await events_of(log, "m")
    assert state.status == RunStatus.COMPLETED and state.values["got"] == ["a1", "b1"]
    assert [e.data.key for e in events if isinstance(e.data, MessageSent)][:1] == ["k1"]


@pytest.mark.parametrize("first", ["sender", "driver"])
async def test_one_key_sent_from_two_processes_is_reported_once(tmp_path: Path, first: str) -> None:
    """Two processes send one key to a run one of them drives: whichever
    stored it first gets True and its value is the one recorded, the other
    gets False (the driver's send used to hand its message to its executor,
    which recorded it before the stored one: True twice, one value dropped)."""
    gate = Gate()
    wf = inbox_workflow(Calls(), gate, takes=1)
    async with SqliteEventLog(tmp_path / "agentlog.db") as log:
        async with Runtime(log, workflows=[wf], config=config("driver")) as driver:
            await driver.start(wf, run_id="m")
            async with asyncio.timeout(20):
                await gate.reached.wait()  # its step runs: the driver holds the run
            executor = driver.driver.active_run("m")
            assert executor is not None
            async with Runtime(log, workflows=[wf], config=config("sender")) as sender:
                if first == "sender":
                    there = await sender.send("m", "a", "from-sender", idempotency_key="k1")
                here = asyncio.create_task(
                    driver.send("m", "a", "from-driver", idempotency_key="k1")
                )

                async def settled() -> bool:  # answered, or waiting for the executor
                    return here.done() or len(executor.inbox) == 1

                await until(settled, "the driver's send is answered or handed over", 20.0)
                if first == "driver":
                    there = await sender.send("m", "a", "from-sender", idempotency_key="k1")
            gate.release.set()
            async with asyncio.timeout(20):
                here_said = await here
            assert await driver.send("m", "b", "b1") is True
            assert (await run_to_rest(driver, "m")).status == RunStatus.COMPLETED
        events = await events_of(log, "m")
    assert sorted([there, here_said]) == [False, True]
    sent = [(e.data.key, e.data.value) for e in events if isinstance(e.data, MessageSent)]
    assert [value for key, value in sent if key == "k1"] == [f"from-{first}"]  # once
