"""A parked run, then ``cancel`` and ``resume`` at once from two runtimes.

Shared by the cancel/resume race tests of every backend that runtimes write
directly (issue 19 item 6): the two calls go through the same code on
SQLite, PostgreSQL and Redis, so each backend runs the same bounded race.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from agentlog.errors import LeaseHeldError, RunNotWaitingError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunStatus
from agentlog.runtime import RunHandle, Runtime, RuntimeConfig, StepContext, Workflow, end

#: What the loser of the race may get from ``resume``.
RESUME_LOSES = (RunNotWaitingError, LeaseHeldError)


def approval_workflow() -> Workflow:
    """One step that parks on a question and ends with the answer."""
    wf = Workflow("approval", state={"approved": "replace"})

    @wf.step
    async def ask(ctx: StepContext) -> Any:
        return end(approved=ctx.interrupt("approve?"))

    return wf


async def parked(rt: Runtime, wf: Workflow, run_id: str) -> None:
    """Start ``run_id`` in ``rt`` and wait (bounded) until it parks on its question."""
    await rt.start(wf, run_id=run_id)
    async with asyncio.timeout(30):
        state = await rt.wait(run_id)
    assert state.status == RunStatus.WAITING, f"{run_id} did not park: {state.status}"


async def race_cancel_and_resume(url: str, runs: int) -> Counter[str]:
    """``runs`` times: park a run, then cancel it from one runtime while
    another resumes it. Checks every outcome; returns how often each came.

    Each runtime opens its own connection (as two processes would) and runs
    the default background worker.
    """
    wf = approval_workflow()
    seen: Counter[str] = Counter()
    a = await Runtime.open(url, workflows=[wf], config=RuntimeConfig(owner="canceller"))
    b = await Runtime.open(url, workflows=[wf], config=RuntimeConfig(owner="resumer"))
    try:
        for i in range(runs):
            run_id = f"race-{i}"
            await parked(a, wf, run_id)
            cancelled, resumed = await asyncio.gather(
                a.cancel(run_id), b.resume(run_id, True), return_exceptions=True
            )
            assert not isinstance(cancelled, BaseException), f"{run_id}: cancel: {cancelled!r}"
            assert cancelled.status in RunStatus.TERMINAL, f"{run_id}: cancel gave {cancelled}"
            if isinstance(resumed, BaseException):
                assert isinstance(resumed, RESUME_LOSES), f"{run_id}: resume raised {resumed!r}"
            else:
                assert isinstance(resumed, RunHandle)
            async with asyncio.timeout(30):
                final = await a.wait(run_id)  # followed through the log
            await check_one_ending(a.log, run_id, resumed_lost=isinstance(resumed, BaseException))
            assert final.status == cancelled.status, f"{run_id}: {final.status} after {cancelled}"
            seen[f"cancel {cancelled.status}"] += 1
            seen[f"resume {type(resumed).__name__}"] += 1
    finally:
        await b.close()
        await a.close()
    return seen


async def check_one_ending(log: EventLog, run_id: str, *, resumed_lost: bool) -> None:
    """The run's history ends once, and holds no answer from a resume that lost."""
    types = [event.type async for event in log.read(run_id)]
    endings = [t for t in types if t in ("RunCompleted", "RunCancelled", "RunFailed")]
    assert len(endings) == 1 and types[-1] == endings[0], f"{run_id}: {types}"
    if resumed_lost:
        assert "ResumeReceived" not in types, f"{run_id}: a refused resume was recorded: {types}"
