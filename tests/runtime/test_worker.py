"""The worker: runs drive themselves (submit, limits, hand-over, orphans, commands)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentlog.errors import ConfigError, NoLiveWriterError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunStatus
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.runtime import Runtime, StepContext, Worker, WorkerConfig, Workflow, end, goto
from tests.support.runtime import Calls, config, event_log, run_to_rest, types_of

__all__ = ["event_log"]


def gated(calls: Calls, gate: asyncio.Event, name: str = "gated") -> Workflow:
    """Two steps; the first waits for ``gate`` (so a test can hold runs mid-step)."""
    wf = Workflow(name, state={"n": "replace"})

    @wf.step
    async def first(ctx: StepContext) -> Any:
        calls.hit("first")
        calls.count["inside"] += 1
        calls.count["most"] = max(calls.count["most"], calls.count["inside"])
        try:
            await gate.wait()
        finally:
            calls.count["inside"] -= 1
        return goto("second", n=1)

    @wf.step
    async def second(ctx: StepContext) -> Any:
        calls.hit("second")
        return end(n=2)

    return wf


def client(log: EventLog, *workflows: Workflow) -> Runtime:
    """A runtime that records requests and executes nothing."""
    return Runtime(log, workflows=workflows, config=config("client", execute=False))


async def _until(predicate: Any, seconds: float = 20.0) -> None:
    async with asyncio.timeout(seconds):
        while not await predicate():  # noqa: ASYNC110 - polls the log
            await asyncio.sleep(0.01)


async def test_a_submitted_run_is_driven_by_a_worker_elsewhere(event_log: EventLog) -> None:
    calls, gate = Calls(), asyncio.Event()
    gate.set()
    wf = gated(calls, gate)
    async with client(event_log, wf) as rt:
        handle = await rt.submit(wf, run_id="r1", input={"n": 0})
        assert (await event_log.get_run("r1")).status == RunStatus.RUNNING
        assert calls.count["first"] == 0  # a client executes nothing
        again = await rt.submit(wf, run_id="r1", input={"n": 0})  # idempotent on run id
        assert again.run_id == handle.run_id
        assert (await types_of(event_log, "r1")) == ["RunStarted"]
        async with Runtime(event_log, workflows=[wf], config=config("w", worker=True)) as worker:
            worker.worker.wake.set()
            await _until(lambda: _status_is(event_log, "r1", RunStatus.COMPLETED))
            del worker
        assert (await rt.wait("r1", timeout=5)).values == {"n": 2}
    assert calls.count["first"] == 1 and calls.count["second"] == 1


async def _status_is(log: EventLog, run_id: str, status: str) -> bool:
    return (await log.get_run(run_id)).status == status


async def test_concurrency_limits_hold_runs_back_until_a_slot_frees(event_log: EventLog) -> None:
    calls, gate = Calls(), asyncio.Event()
    wf = gated(calls, gate)
    other_calls = Calls()
    other = gated(other_calls, gate, name="other")
    async with client(event_log, wf, other) as rt:
        for i in range(5):
            await rt.submit(wf, run_id=f"g{i}")
        await rt.submit(other, run_id="o0")
        settings = WorkerConfig(concurrency=3, workflow_concurrency={"gated": 2})
        async with Runtime(
            event_log, workflows=[wf, other], config=config("w", worker_config=settings)
        ) as owner:
            worker = Worker(owner.driver, owner.log, settings)
            taken = await worker.run_once()
            assert sorted(taken)[-1] == "o0" and len(taken) == 3  # 2 of gated, 1 of other
            await _until(lambda: _inside(calls, other_calls, 3))
            assert await worker.run_once() == []  # full: nothing more starts
            gate.set()  # every run may finish now; slots free up one by one
            while len(await event_log.list_runs(status=RunStatus.COMPLETED)) < 6:
                await worker.run_once()
                await asyncio.sleep(0.01)
    assert calls.count["most"] <= 2 and other_calls.count["most"] <= 1
    assert calls.count["second"] == 5 and other_calls.count["second"] == 1


async def _inside(calls: Calls, other: Calls, n: int) -> bool:
    return calls.count["inside"] + other.count["inside"] == n


async def test_a_stopping_worker_hands_runs_over_at_a_step_boundary(event_log: EventLog) -> None:
    calls, gate = Calls(), asyncio.Event()
    wf = gated(calls, gate)
    async with client(event_log, wf) as rt:
        await rt.submit(wf, run_id="h")
        first = Runtime(event_log, workflows=[wf], config=config("first"))
        serving = asyncio.create_task(first.serve())
        first.worker.wake.set()
        await _until(lambda: _inside(calls, Calls(), 1))
        first.worker.stop()  # SIGTERM: the current step finishes, is recorded, handed over
        gate.set()
        await asyncio.wait_for(serving, 20)
        await first.close()
        info = await event_log.get_run("h")
        assert info.status == RunStatus.RUNNING and info.lease_expires_at is None
        assert (await types_of(event_log, "h")).count("StepCompleted") == 1
        async with Runtime(event_log, workflows=[wf], config=config("second", worker=True)):
            await _until(lambda: _status_is(event_log, "h", RunStatus.COMPLETED))
    assert calls.count["first"] == 1 and calls.count["second"] == 1  # nothing ran twice


async def test_a_run_of_an_unknown_workflow_waits_for_a_worker_that_knows_it(
    event_log: EventLog,
) -> None:
    calls, gate = Calls(), asyncio.Event()
    gate.set()
    wf, stranger = gated(calls, gate), Workflow("stranger", state={"n": "replace"})

    @stranger.step
    async def only(ctx: StepContext) -> Any:
        return end(n=0)

    async with client(event_log, wf) as rt:
        await rt.submit(wf, run_id="u")
        async with Runtime(event_log, workflows=[stranger], config=config("w")) as other:
            assert await Worker(other.driver, other.log).run_once() == []
        assert (await event_log.get_run("u")).status == RunStatus.RUNNING
        async with Runtime(event_log, workflows=[wf], config=config("w2")) as knows:
            assert await Worker(knows.driver, knows.log).run_once() == ["u"]
            await run_to_rest(knows, "u")
    assert (await event_log.get_run("u")).status == RunStatus.COMPLETED


async def test_wait_says_when_no_worker_takes_a_submitted_run(event_log: EventLog) -> None:
    wf = gated(Calls(), asyncio.Event())
    cfg = config("client", execute=False, orphan_grace_seconds=0.2)
    async with Runtime(event_log, workflows=[wf], config=cfg) as rt:
        await rt.submit(wf, run_id="lonely")
        with pytest.raises(NoLiveWriterError, match="no live worker took it"):
            await rt.wait("lonely", timeout=30)
    assert (await event_log.get_run("lonely")).status == RunStatus.RUNNING  # nothing lost


async def test_no_live_writer_names_the_last_writer_not_the_submitting_client(
    event_log: EventLog,
) -> None:
    """The index names the last writer that *claimed* a run: the client that
    submitted it, until a worker takes it. ``wait`` must not call that client
    the run's last writer."""
    wf = gated(Calls(), asyncio.Event())
    cfg = config("client", execute=False, orphan_grace_seconds=0.2)
    async with Runtime(event_log, workflows=[wf], config=cfg) as rt:
        await rt.submit(wf, run_id="lonely")
        with pytest.raises(NoLiveWriterError) as untaken:
            await rt.wait("lonely", timeout=30)
        said = str(untaken.value)
        assert "it was started by 'client' and no worker has taken it yet" in said, said
        assert "last writer" not in said
        # A worker takes it, then dies: its lease ends with nothing recorded.
        epoch = await event_log.claim_writer("lonely", owner="w-dead", force=False)
        await event_log.release_lease("lonely", epoch)
        with pytest.raises(NoLiveWriterError) as gone:
            await rt.wait("lonely", timeout=30)
        assert "its last writer 'w-dead' is gone" in str(gone.value), str(gone.value)


async def test_commands_reach_the_owning_worker_and_apply_once() -> None:
    log = MemoryEventLog(commands=True)
    calls = Calls()
    wf = Workflow("asks", state={"answer": "replace"})

    @wf.step
    async def ask(ctx: StepContext) -> Any:
        calls.hit("ask")
        return end(answer=ctx.interrupt("ok?", expects="bool"))

    async with client(log, wf) as rt:
        await rt.submit(wf, run_id="c")
        assert await log.find_run("c") is None  # only the owner records it
        async with Runtime(log, workflows=[wf], config=config("owner")) as owner:
            worker = Worker(owner.driver, owner.log)
            await worker.run_once()
            assert (await run_to_rest(owner, "c")).status == RunStatus.WAITING
            await rt.resume("c", True)
            await rt.resume("c", True)  # sent twice (a retrying client): applied once
            await worker.run_once()
            assert (await run_to_rest(owner, "c")).values == {"answer": True}
            await rt.submit(wf, run_id="c")  # start again: the existing run
            await worker.run_once()
        assert await log.take_commands() == []  # every command acked
    assert (await types_of(log, "c")).count("ResumeReceived") == 1
    assert (await types_of(log, "c")).count("RunStarted") == 1


async def test_a_client_cannot_send_commands_to_a_log_that_takes_direct_writes() -> None:
    from agentlog.eventlog._base import Command
    from agentlog.eventlog.events import RunCancelled

    with pytest.raises(ConfigError, match="direct writes"):
        await MemoryEventLog().send_command(Command("x", "cancel", RunCancelled()))


def test_worker_config_refuses_nonsense() -> None:
    with pytest.raises(ConfigError, match="concurrency"):
        WorkerConfig(concurrency=0)
    with pytest.raises(ConfigError, match="limits"):
        WorkerConfig(workflow_concurrency={"a": 0})
    with pytest.raises(ConfigError, match="poll_seconds"):
        WorkerConfig(poll_seconds=0)


async def test_wait_on_a_command_no_worker_applied_says_so() -> None:
    log = MemoryEventLog(commands=True)
    wf = gated(Calls(), asyncio.Event())
    cfg = config("client", execute=False, orphan_grace_seconds=0.2)
    async with Runtime(log, workflows=[wf], config=cfg) as rt:
        await rt.submit(wf, run_id="queued")
        with pytest.raises(NoLiveWriterError, match="no live worker took it"):
            await rt.wait("queued", timeout=30)
    assert [c.run_id for c in await log.take_commands()] == ["queued"]  # still queued


async def test_a_command_is_on_record_before_it_is_acked_even_in_exit_mode() -> None:
    """An ``exit`` run writes nothing until it parks; the start a client asked
    for must still be recorded before its command is acked (on Kafka the ack
    rides on that append), or a worker dying mid-step would lose the run."""
    log = MemoryEventLog(commands=True)
    calls, gate = Calls(), asyncio.Event()
    wf = gated(calls, gate)
    async with client(log, wf) as rt:
        await rt.submit(wf, run_id="x", durability="exit")
        async with Runtime(log, workflows=[wf], config=config("owner")) as owner:
            await Worker(owner.driver, owner.log).run_once()
            await _until(lambda: _inside(calls, Calls(), 1))  # mid-step, nothing parked
            assert await log.take_commands() == []  # acked ...
            assert (await types_of(log, "x"))[0] == "RunStarted"  # ... and on record
            gate.set()
            assert (await run_to_rest(owner, "x")).status == RunStatus.COMPLETED


class _HeldStarts(MemoryEventLog):
    """A commands log whose appends of one run wait for a gate (a slow commit)."""

    def __init__(self, held: str) -> None:
        super().__init__(commands=True)
        self.held, self.entered, self.gate = held, asyncio.Event(), asyncio.Event()

    async def append(self, events: Any, *, durable: bool = True) -> None:
        if events and events[0].run_id == self.held:
            self.entered.set()
            await self.gate.wait()
        await super().append(events, durable=durable)


async def test_a_worker_takes_new_commands_while_earlier_ones_commit() -> None:
    """A command whose commit is slow does not hold the worker's next passes:
    a start sent after it is applied and its run driven meanwhile."""
    log = _HeldStarts("slow")
    wf = Workflow("once", state={"n": "replace"})

    @wf.step
    async def only(ctx: StepContext) -> Any:
        return end(n=1)

    async with client(log, wf) as rt:
        async with Runtime(log, workflows=[wf], config=config("owner", worker=True)) as owner:
            await rt.submit(wf, run_id="slow")
            async with asyncio.timeout(20):
                await log.entered.wait()  # the worker is applying it, held
            await rt.submit(wf, run_id="fast")
            try:
                state = await owner.wait("fast", timeout=20)
                assert state.status == RunStatus.COMPLETED
                held = await log.find_run("slow")
                assert held is None or held.last_seq == 0  # its start still held
            finally:
                log.gate.set()
            assert (await owner.wait("slow", timeout=20)).status == RunStatus.COMPLETED
        assert await log.take_commands() == []  # every command acked
