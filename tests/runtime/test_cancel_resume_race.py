"""``cancel`` racing ``resume`` never raises FencedError (issue 19 item 6).

A cancel used to claim the run by force with no lease. A resume that had
claimed the run just before it then failed its append with ``FencedError``
("this writer must stop") although its caller owns no writer; and a resume
claiming just after it took the run from under the cancel, whose append
failed the same way. The loser now gets ``RunNotWaitingError`` or
``LeaseHeldError`` (nothing of it recorded), and a cancel returns the run's
final state.

The first two tests pin each interleaving by holding one side's append until
the other side has finished; the last races the two calls for real, a bounded
number of times, from two connections to one SQLite file.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentlog.errors import LeaseHeldError, RunNotWaitingError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import Event, RunStatus
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime, StepContext, Workflow, end
from tests.support.cancel_race import approval_workflow, parked, race_cancel_and_resume
from tests.support.runtime import BACKENDS, Gate, config, event_log, types_of

__all__ = ["event_log"]


class _HeldAppends:
    """Holds the first append that records an event of type ``held`` until
    ``release`` is set, after setting ``reached``."""

    held = ""

    def _init_hold(self) -> None:
        self.reached, self.release = asyncio.Event(), asyncio.Event()

    async def _hold(self, events: Sequence[Event]) -> None:
        if not self.reached.is_set() and any(e.type == self.held for e in events):
            self.reached.set()
            await self.release.wait()


class _HeldMemoryLog(_HeldAppends, MemoryEventLog):
    def __init__(self) -> None:
        super().__init__()
        self._init_hold()

    async def append(self, events: Sequence[Event], *, durable: bool = True) -> None:
        await self._hold(events)
        await super().append(events, durable=durable)


class _HeldSqliteLog(_HeldAppends, SqliteEventLog):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._init_hold()

    async def append(self, events: Sequence[Event], *, durable: bool = True) -> None:
        await self._hold(events)
        await super().append(events, durable=durable)


@pytest.fixture(params=BACKENDS)
async def held_log(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[_HeldMemoryLog | _HeldSqliteLog]:
    log = _HeldMemoryLog() if request.param == "memory" else _HeldSqliteLog(tmp_path / "a.db")
    try:
        yield log
    finally:
        log.release.set()
        await log.close()


async def _two_runtimes(log: EventLog) -> tuple[Runtime, Runtime]:
    wf = approval_workflow()
    canceller = Runtime(log, workflows=[wf], config=config("canceller"))
    resumer = Runtime(log, workflows=[wf], config=config("resumer"))
    await parked(canceller, wf, "r")
    return canceller, resumer


async def test_a_resume_whose_write_a_cancel_outruns_says_the_run_is_cancelled(
    held_log: _HeldMemoryLog | _HeldSqliteLog,
) -> None:
    """The resume has claimed the run; the cancel takes it over and records
    first; the resume's write is then fenced. Its caller hears that the run
    was cancelled, not that a writer it never had must stop."""
    canceller, resumer = await _two_runtimes(held_log)
    held_log.held = "ResumeReceived"
    resuming = asyncio.create_task(resumer.resume("r", True))
    async with asyncio.timeout(10):
        await held_log.reached.wait()  # claimed, its answer not yet written
        cancelled = await canceller.cancel("r", "not needed")
    assert cancelled.status == RunStatus.CANCELLED
    held_log.release.set()
    with pytest.raises(RunNotWaitingError, match="cancelled"):
        async with asyncio.timeout(10):
            await resuming
    assert await types_of(held_log, "r") == [
        "RunStarted",
        "InterruptRaised",
        "WriterClaimed",
        "RunCancelled",
    ]
    await resumer.close()
    await canceller.close()


async def test_a_cancel_holds_the_run_against_a_resume_until_it_is_recorded(
    held_log: _HeldMemoryLog | _HeldSqliteLog,
) -> None:
    """The cancel has claimed the run; a resume comes before its write. The
    resume is refused (the cancel's lease is live) instead of fencing the
    cancel, which then records and returns the cancelled run."""
    canceller, resumer = await _two_runtimes(held_log)
    held_log.held = "RunCancelled"
    cancelling = asyncio.create_task(canceller.cancel("r", "not needed"))
    async with asyncio.timeout(10):
        await held_log.reached.wait()  # claimed, its cancel not yet written
        with pytest.raises(LeaseHeldError, match="canceller"):
            await resumer.resume("r", True)
    held_log.release.set()
    async with asyncio.timeout(10):
        cancelled = await cancelling
    assert cancelled.status == RunStatus.CANCELLED
    assert "ResumeReceived" not in await types_of(held_log, "r")
    with pytest.raises(RunNotWaitingError, match="cancelled"):
        await resumer.resume("r", True)
    await resumer.close()
    await canceller.close()


async def test_cancel_and_resume_raced_from_two_connections_never_raise_fenced(
    tmp_path: Path,
) -> None:
    seen = await race_cancel_and_resume(f"sqlite:///{tmp_path / 'race.db'}", runs=40)
    assert sum(n for outcome, n in seen.items() if outcome.startswith("cancel")) == 40


async def test_a_start_that_a_cancel_outruns_returns_the_existing_run(
    held_log: _HeldMemoryLog | _HeldSqliteLog,
) -> None:
    """Starting a running run with no live writer takes it over; a cancel
    that takes it first fences that claim. ``start`` still returns the
    existing run (it is idempotent on run id), which is now cancelled."""
    wf = approval_workflow()
    canceller = Runtime(held_log, workflows=[wf], config=config("canceller"))
    starter = Runtime(held_log, workflows=[wf], config=config("starter"))
    await canceller.submit(wf, run_id="r", durability="sync")  # running, no writer
    held_log.held = "WriterClaimed"
    starting = asyncio.create_task(starter.start(wf, run_id="r"))
    async with asyncio.timeout(10):
        await held_log.reached.wait()  # claimed, its claim not yet recorded
        cancelled = await canceller.cancel("r", "not needed")
    assert cancelled.status == RunStatus.CANCELLED
    held_log.release.set()
    async with asyncio.timeout(10):
        handle = await starting
        assert (await handle.wait()).status == RunStatus.CANCELLED
    assert await types_of(held_log, "r") == ["RunStarted", "WriterClaimed", "RunCancelled"]
    await starter.close()
    await canceller.close()


async def test_a_cancel_of_a_run_driven_here_that_another_cancel_takes_over_returns_it(
    held_log: _HeldMemoryLog | _HeldSqliteLog,
) -> None:
    """This process drives the run and cancels it (its running step is
    interrupted); another process cancels it before the RunCancelled here is
    written, which fences the driver here. The cancel here returns the
    cancelled run instead of the fence."""
    gate = Gate()
    wf = Workflow("slow", state={"n": "replace"})

    @wf.step
    async def work(ctx: StepContext) -> Any:
        await gate.pass_through()
        return end(n=1)

    held_log.held = "RunCancelled"
    driver = Runtime(held_log, workflows=[wf], config=config("driver"))
    other = Runtime(held_log, workflows=[wf], config=config("other"))
    await driver.start(wf, run_id="r", durability="sync")
    async with asyncio.timeout(10):
        await gate.reached.wait()
        cancelling = asyncio.create_task(driver.cancel("r", "from here"))
        await held_log.reached.wait()  # the cancel here is about to be written
        taken = await other.cancel("r", "from elsewhere")
        held_log.release.set()
        cancelled = await cancelling
    gate.release.set()
    assert taken.status == cancelled.status == RunStatus.CANCELLED
    assert cancelled.error == "from elsewhere"
    assert (await types_of(held_log, "r"))[-1] == "RunCancelled"
    await other.close()
    await driver.close()


async def test_two_cancels_at_once_both_return_the_cancelled_run(
    held_log: _HeldMemoryLog | _HeldSqliteLog,
) -> None:
    """A cancel's forced claim fences an earlier cancel's; that one finds the
    run ended and returns it."""
    first, second = await _two_runtimes(held_log)
    held_log.held = "RunCancelled"
    cancelling = asyncio.create_task(first.cancel("r", "first"))
    async with asyncio.timeout(10):
        await held_log.reached.wait()  # claimed, its cancel not yet written
        won = await second.cancel("r", "second")
        held_log.release.set()
        lost = await cancelling
    assert won.status == lost.status == RunStatus.CANCELLED
    assert won.error == lost.error == "second"
    assert (await types_of(held_log, "r")).count("RunCancelled") == 1
    await second.close()
    await first.close()
