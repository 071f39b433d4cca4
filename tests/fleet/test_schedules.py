"""Schedules across workers and outages, on one SQLite file.

A cron schedule ticks at most once a minute, so these tests drive the
workers' passes in-process with an explicit ``now`` (``Worker.run_once(now=)``)
instead of waiting for the clock: two workers (two runtimes on one file, as
two processes would be) passing over the same window start each tick's run
exactly once, and a worker that starts after an outage starts the missed
ticks once each, within the schedule's ``catchup``, and never a tick twice.
Run ids come from the tick (``<workflow>@<tick>``), so the log itself shows
whether a tick started twice: one history per tick, one RunStarted in it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from agentlog.errors import InvalidScheduleError
from agentlog.eventlog.events import RunStatus, utcnow
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, WorkerConfig, Workflow, end
from tests.support.fleet import history, types, until

pytestmark = pytest.mark.fleet

MINUTE = timedelta(minutes=1)


def ticking(catchup: timedelta) -> Workflow:
    """A workflow scheduled every minute whose run records its own tick."""
    wf = Workflow("tick", state={"tick": "replace", "done": "replace"})

    @wf.step
    async def go(ctx: StepContext) -> Any:
        return end(done=True)

    @wf.schedule("* * * * *", catchup=catchup)
    def tick_input(tick: datetime) -> dict[str, Any]:
        return {"tick": tick.isoformat()}

    return wf


def minute_ticks(after: datetime, upto: datetime) -> list[str]:
    """The run ids of every-minute ticks with ``after < tick <= upto``, computed
    without the cron library (the run id format is part of the contract)."""
    tick = after.replace(second=0, microsecond=0) + MINUTE
    ids = []
    while tick <= upto:
        ids.append(f"tick@{tick.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}")
        tick += MINUTE
    return ids


@pytest.fixture
async def workers(tmp_path: Path) -> AsyncIterator[Any]:
    """Makes runtimes on one SQLite file (each with its own worker, not
    started: the test drives its passes); closes them all at the end."""
    url = f"sqlite:///{tmp_path / 'schedules.db'}"
    numbers = itertools.count()
    async with AsyncExitStack() as stack:

        async def make(wf: Workflow) -> Runtime:
            config = RuntimeConfig(
                owner=f"worker-{next(numbers)}",
                worker=False,
                worker_config=WorkerConfig(poll_seconds=0.05),
            )
            rt = await Runtime.open(url, workflows=[wf], config=config)
            return await stack.enter_async_context(rt)

        yield make


async def started_ticks(rt: Runtime) -> list[str]:
    """Every tick run in the log, each checked to have one history with one RunStarted."""
    ids = sorted(i.run_id for i in await rt.log.list_runs() if i.workflow == "tick")
    for run_id in ids:
        assert types(await history(rt.log, run_id)).count("RunStarted") == 1, run_id
    return ids


async def drain(*runtimes: Runtime) -> None:
    """Let the workers drive every submitted tick run to its end (bounded).

    Their passes act at the real time, which is before their last (simulated)
    pass, so they submit no tick here: they only take the runs."""

    async def all_done() -> bool:
        await asyncio.gather(*(rt.worker.run_once() for rt in runtimes))
        infos = [i for i in await runtimes[0].log.list_runs() if i.workflow == "tick"]
        return all(i.status == RunStatus.COMPLETED for i in infos)

    await until(all_done, "every tick run completed", 120)


async def test_two_workers_over_the_same_window_start_each_tick_once(workers: Any) -> None:
    catchup = timedelta(minutes=20)
    a, b = await workers(ticking(catchup)), await workers(ticking(catchup))
    start = utcnow()
    # Both pass at the same instants, interleaved on one loop, over 15 minutes.
    moments = [start + timedelta(seconds=20 * k) for k in range(46)]
    with capture_logs() as logs:
        for now in moments:
            await asyncio.gather(a.worker.run_once(now=now), b.worker.run_once(now=now))
    await drain(a, b)
    # Where both submitted one tick at once, the loser's append conflicted (or
    # its claim found the winner's lease) and nothing forked: the log shows it.
    collisions = [e for e in logs if e["event"] == "schedule tick not submitted"]
    print(f"SCHEDULE collisions={len(collisions)}")
    assert await started_ticks(a) == minute_ticks(start - catchup, moments[-1])
    for run_id in await started_ticks(a):
        tick = run_id.removeprefix("tick@").replace("Z", "+00:00")
        assert (await a.get_state(run_id)).values == {"tick": tick, "done": True}


async def test_a_worker_back_from_an_outage_starts_the_missed_ticks_once(workers: Any) -> None:
    catchup = timedelta(hours=1)
    before = await workers(ticking(catchup))
    start = utcnow()
    await before.worker.run_once(now=start)
    assert await started_ticks(before) == minute_ticks(start - catchup, start)
    # No worker for 25 minutes; then a fresh one (no memory of the old one's
    # passes) comes back, while the old one makes its next pass at the same time.
    back = start + timedelta(minutes=25)
    fresh = await workers(ticking(catchup))
    await asyncio.gather(fresh.worker.run_once(now=back), before.worker.run_once(now=back))
    expected = minute_ticks(start - catchup, back)
    assert await started_ticks(fresh) == expected
    # A second restart over the same window starts nothing again.
    again = await workers(ticking(catchup))
    await again.worker.run_once(now=back)
    await drain(before, fresh, again)
    assert await started_ticks(again) == expected


async def test_ticks_missed_beyond_the_catchup_window_are_not_started(workers: Any) -> None:
    catchup = timedelta(minutes=10)
    before = await workers(ticking(catchup))
    start = utcnow()
    await before.worker.run_once(now=start)
    back = start + timedelta(minutes=30)
    fresh = await workers(ticking(catchup))
    await fresh.worker.run_once(now=back)
    # Only the worker that came back drives them: the one before the outage is
    # gone (a pass of it at the real time would look for ticks up to now).
    await drain(fresh)
    assert await started_ticks(fresh) == (
        minute_ticks(start - catchup, start) + minute_ticks(back - catchup, back)
    )


@pytest.mark.parametrize("cron", ["not a cron", "61 * * * *", "* * * *", "* * * * * * *", ""])
def test_a_bad_cron_expression_is_refused_at_definition(cron: str) -> None:
    wf = Workflow("bad", state={"x": "replace"})
    with pytest.raises(InvalidScheduleError, match="cron"):
        wf.schedule(cron)
    assert wf.schedules == []


def test_a_negative_catchup_is_refused_at_definition() -> None:
    with pytest.raises(InvalidScheduleError, match="catchup"):
        Workflow("bad", state={"x": "replace"}).schedule("* * * * *", catchup=-MINUTE)
