"""No side effect starts without a durable intent, from a fenced writer, or past the lease.

Regressions for issue 8 item 1: a failed sync flush lost the events of the
branches waiting behind it, and a writer paused after its TaskStarted was
durable began the effect after another process had taken the run over.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentlog.errors import BackendUnavailableError, FencedError, LeaseExpiredError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import Event, RunStatus, WriterClaimed, utcnow
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.projector._snapshots import SnapshotPolicy
from agentlog.projector._state import RunState
from agentlog.runtime import Runtime, StepContext, Workflow, end, goto
from agentlog.runtime._writer import RunWriter
from tests.support.runtime import config, event_log, events_of, run_to_rest

__all__ = ["event_log"]


class GatedThenFailingLog(MemoryEventLog):
    """The first append waits for a gate; the second one fails (injected)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.appends = 0

    async def append(self, events: Sequence[Event], *, durable: bool = True) -> None:
        self.appends += 1
        if self.appends == 1:
            await self.gate.wait()
        elif self.appends == 2:
            raise BackendUnavailableError("injected: the disk went away mid-append")
        await super().append(events, durable=durable)


async def _writer(log: EventLog, *, durability: str = "sync", **kwargs: Any) -> RunWriter:
    epoch = await log.claim_writer("r", owner="test")
    writer = RunWriter(
        log,
        RunState(run_id="r"),
        epoch=epoch,
        durability=durability,
        snapshots=SnapshotPolicy(on_park=False),
        **kwargs,
    )
    writer.emit(WriterClaimed(epoch, "test"))
    return writer


def _ctx(writer: RunWriter, branch: int) -> StepContext:
    return StepContext(writer, step="s", superstep=0, branch=branch, attempt=1, state={})


async def test_a_failed_sync_flush_fails_every_branch_whose_intent_it_held() -> None:
    log = GatedThenFailingLog()
    writer = await _writer(log)
    first = asyncio.create_task(writer.flush())  # holds the lock, blocked in its append
    effects: list[int] = []

    async def effect(branch: int) -> int:
        effects.append(branch)
        return branch

    branches = [asyncio.create_task(_ctx(writer, b).task("charge", effect, b)) for b in range(3)]
    async with asyncio.timeout(10):
        while writer.state.seq < 4:  # noqa: ASYNC110 - all three TaskStarted emitted
            await asyncio.sleep(0)
    log.gate.set()
    await first
    results = await asyncio.gather(*branches, return_exceptions=True)
    assert effects == [], "an effect ran although its TaskStarted was never written"
    assert all(isinstance(r, BackendUnavailableError) for r in results), results
    assert [e.type for e in await events_of(log, "r")] == ["WriterClaimed"]
    with pytest.raises(BackendUnavailableError):  # the writer stays stopped
        await writer.flush()


@pytest.mark.parametrize("durability", ["sync", "async"])
async def test_a_fenced_writer_never_begins_an_effect(durability: str) -> None:
    writer = await _writer(MemoryEventLog(), durability=durability)
    writer.fence(FencedError("r", 1, 2))
    effects: list[str] = []
    with pytest.raises(FencedError):
        await _ctx(writer, 0).task("email", lambda: effects.append("sent"))
    assert effects == []
    writer.abandon()


@pytest.mark.parametrize("durability", ["sync", "async"])
async def test_a_writer_past_its_own_lease_stops_before_the_effect(durability: str) -> None:
    log = MemoryEventLog()
    writer = await _writer(log, durability=durability, lease_deadline=time.monotonic() - 1)
    effects: list[str] = []
    with pytest.raises(LeaseExpiredError, match="lost its lease"):
        await _ctx(writer, 0).task("email", lambda: effects.append("sent"))
    assert effects == []
    assert [e.type for e in await events_of(log, "r")][-1] == "TaskStarted"  # intent durable
    writer.abandon()


class PausingLog(SqliteEventLog):
    """Freezes its event loop (like SIGSTOP) right after a chosen append is durable."""

    def __init__(self, path: Path, pause_after: str, resume: threading.Event) -> None:
        super().__init__(path)
        self.pause_after, self.resume, self.paused = pause_after, resume, threading.Event()

    async def append(self, events: Sequence[Event], *, durable: bool = True) -> None:
        await super().append(events, durable=durable)
        names = [getattr(e.data, "name", "") for e in events if e.type == "TaskStarted"]
        if self.pause_after in names and not self.paused.is_set():
            self.paused.set()
            self.resume.wait(60)  # blocks the whole loop: no heartbeat, no renewal


@pytest.mark.parametrize("durability", ["sync", "async"])
async def test_a_paused_zombie_does_not_send_after_a_takeover(
    tmp_path: Path, durability: str
) -> None:
    path = tmp_path / "agentlog.db"
    effects: Counter[str] = Counter()
    lock = threading.Lock()

    def effect(name: str) -> str:
        with lock:
            effects[name] += 1
        return name

    def workflow() -> Workflow:
        wf = Workflow("zombie", state={"out": "replace"})

        @wf.step
        async def work(ctx: StepContext) -> Any:
            await ctx.task("research", effect, "research")
            return end(out=await ctx.task("email", effect, "email"))

        return wf

    resume = threading.Event()
    taken_over: list[Any] = []

    async def new_owner() -> None:  # another process: waits out the lease, takes over
        async with Runtime(SqliteEventLog(path), workflows=[workflow()], config=config("b")) as rt:
            async with asyncio.timeout(60):
                while True:
                    info = await rt.log.find_run("z")
                    expires = info.lease_expires_at if info else None
                    if (
                        info is not None
                        and info.last_seq
                        and (expires is None or expires < utcnow())
                    ):
                        break
                    await asyncio.sleep(0.05)
                taken_over.append(await rt.recover())
                taken_over.append(await rt.wait("z", timeout=60))
        resume.set()

    zombie_log = PausingLog(path, "email", resume)
    owner = threading.Thread(target=lambda: asyncio.run(new_owner()))
    rt = Runtime(zombie_log, workflows=[workflow()], config=config("a", lease_seconds=1.0))
    try:
        await rt.start(workflow(), run_id="z", durability=durability)
        owner.start()
        with pytest.raises((LeaseExpiredError, FencedError)):
            await rt.wait("z", timeout=120)
    finally:
        resume.set()
        owner.join(60)
        await rt.close()
        await zombie_log.close()
    assert taken_over[0].recovered == ["z"]
    assert taken_over[1].status == RunStatus.COMPLETED
    assert effects["email"] == 1, "the zombie sent the email after the takeover"


# -- an input from outside the run is on record before an effect acts on it --------------
#
# The Kafka fleet chaos test caught this in ``exit`` mode: a worker fired a run's
# approval timer, ran the email with "not approved", and died before the run
# parked again. ``exit`` held TimerFired in memory, so the next owner saw the
# run still waiting, a human approved it, and the email (same idempotency key)
# had already gone out saying the opposite. Durability modes govern what a run
# produces; its inputs (start, answer, retry, a timer that fired) are durable
# in every mode before the run goes on.


def _input_checking_workflow(log: EventLog, seen: dict[str, list[str]]) -> Workflow:
    wf = Workflow("inputs", state={"approved": "replace", "sent": "replace", "timeout": "replace"})

    async def on_record(name: str) -> str:
        seen[name] = [e.type for e in await events_of(log, "i")]  # what a crash would keep
        return name

    @wf.step
    async def ask(ctx: StepContext) -> Any:
        await ctx.task("research", on_record, "research")
        timeout = ctx.state.get("timeout")
        approved = ctx.interrupt("send?", expects="bool", timeout=timeout, default=False)
        return goto("send", approved=approved)

    @wf.step
    async def send(ctx: StepContext) -> Any:
        return end(sent=await ctx.task("email", on_record, "email"))

    return wf


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_a_start_and_an_answer_are_on_record_before_any_effect(
    event_log: EventLog, durability: str
) -> None:
    seen: dict[str, list[str]] = {}
    wf = _input_checking_workflow(event_log, seen)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="i", durability=durability)
        assert (await run_to_rest(rt, "i")).status == RunStatus.WAITING
        await rt.resume("i", True)
        state = await run_to_rest(rt, "i")
    assert state.values["approved"] is True and state.status == RunStatus.COMPLETED
    assert "RunStarted" in seen["research"], "an effect ran on a start a crash could undo"
    assert "ResumeReceived" in seen["email"], "the email acted on an answer not on record"


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_a_timer_that_fired_is_on_record_before_any_effect(
    event_log: EventLog, durability: str
) -> None:
    seen: dict[str, list[str]] = {}
    wf = _input_checking_workflow(event_log, seen)
    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="i", input={"timeout": 0.05}, durability=durability)
        assert (await run_to_rest(rt, "i")).status == RunStatus.WAITING
        wake_at = (await event_log.get_run("i")).wake_at
        assert wake_at is not None
        await asyncio.sleep(max(0.0, (wake_at - utcnow()).total_seconds()) + 0.01)
        await rt.fire_timers(wf, "i")  # what a worker does at the due time
        state = await run_to_rest(rt, "i")
    assert state.values["approved"] is False and state.status == RunStatus.COMPLETED
    assert "TimerFired" in seen["email"], "the email acted on a timer not on record"


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_a_writer_taken_over_between_heartbeats_never_begins_an_effect(
    tmp_path: Path, durability: str
) -> None:
    """Another process claims the run while its writer waits inside a step; the
    writer's lease is still good by its own clock and no heartbeat has run.
    In exit mode nothing is appended before the effect, so only asking the
    log stops it (the Kafka fleet test caught the duplicate this made)."""
    path = tmp_path / "agentlog.db"
    reached, release = asyncio.Event(), asyncio.Event()
    effects: list[str] = []
    wf = Workflow("takeover", state={"out": "replace"})

    @wf.step
    async def work(ctx: StepContext) -> Any:
        reached.set()
        await release.wait()
        return end(out=await ctx.task("email", lambda: effects.append("sent") or "sent"))

    async with Runtime(SqliteEventLog(path), workflows=[wf], config=config("a")) as rt:
        await rt.start(wf, run_id="t", durability=durability)
        async with asyncio.timeout(20):
            await reached.wait()
        async with SqliteEventLog(path) as other:  # another process takes the run over
            await other.claim_writer("t", owner="b", force=True)
        release.set()
        with pytest.raises(FencedError):
            await rt.wait("t", timeout=20)
    assert effects == [], f"the email was sent by a writer fenced before it ({durability})"
