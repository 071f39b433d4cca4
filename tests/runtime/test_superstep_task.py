"""A superstep runs in its run's own task, and a cancel still interrupts it.

Creating a task per superstep (and one more to wait on a cancel) cost about
a third of a step's CPU (issue 23, items 6-7; docs/benchmarks.md). The run's
task itself is now cancelled while it runs a superstep; these tests check
that no task is created per superstep, and that a cancel the steps swallow
leaves nothing pending for the run's next write. Nothing is timed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from contextlib import contextmanager
from typing import Any

from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunCancelled, RunStatus, StepCompleted, SuperstepCommitted
from agentlog.runtime import Runtime, StepContext, Workflow, end, goto
from tests.support.runtime import config, event_log, events_of, replay

__all__ = ["event_log"]

#: A hang guard, not a measurement.
_HANG = 60.0


@contextmanager
def _counting_tasks() -> Generator[list[str], None, None]:
    """The names of the coroutines of every asyncio task created meanwhile."""
    loop = asyncio.get_running_loop()
    created: list[str] = []
    before = loop.get_task_factory()

    def factory(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kw: Any) -> Any:
        created.append(getattr(coro, "__qualname__", type(coro).__name__))
        return asyncio.Task(coro, loop=loop, **kw)

    loop.set_task_factory(factory)
    try:
        yield created
    finally:
        loop.set_task_factory(before)


def _loop(steps: int) -> Workflow:
    wf = Workflow(f"loop-{steps}", state={"n": "replace"}, max_steps=steps + 5)

    @wf.step
    async def tick(ctx: StepContext) -> Any:
        n = ctx.state.get("n", 0) + 1
        return end(n=n) if n >= steps else goto("tick", n=n)

    return wf


async def test_a_run_creates_no_task_per_superstep(event_log: EventLog) -> None:
    short, long = _loop(3), _loop(30)
    created: dict[int, list[str]] = {}
    async with Runtime(event_log, workflows=[short, long], config=config()) as rt:
        for wf, steps in ((short, 3), (long, 30)):
            with _counting_tasks() as tasks:
                await rt.start(wf, run_id=f"r{steps}", durability="sync")
                state = await asyncio.wait_for(rt.wait(f"r{steps}"), _HANG)
            assert (state.status, state.steps) == (RunStatus.COMPLETED, steps)
            created[steps] = tasks
    # The same tasks (the run's, its heartbeat's, ...) whatever the step count.
    assert sorted(created[30]) == sorted(created[3]), created


async def test_a_cancel_the_step_swallows_keeps_the_superstep_and_the_run_writes_on(
    event_log: EventLog,
) -> None:
    """The step catches the cancel and returns: its superstep commits (a sync
    write, which a cancel left pending would break), then the cancel is
    recorded at the boundary; the live state equals a replay."""
    wf = Workflow("stubborn", state={"done": "replace"})
    waiting, swallowed = asyncio.Event(), asyncio.Event()

    @wf.step
    async def work(ctx: StepContext) -> Any:
        waiting.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            swallowed.set()
        return goto("after", done="finished anyway")

    @wf.step
    async def after(ctx: StepContext) -> Any:
        return end()

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="r", durability="sync")
        await asyncio.wait_for(waiting.wait(), _HANG)
        state = await asyncio.wait_for(rt.cancel("r", "stop"), _HANG)
        assert swallowed.is_set()
        assert (state.status, state.error) == (RunStatus.CANCELLED, "stop")
        assert state.values == {"done": "finished anyway"}
    kinds = [type(e.data) for e in await events_of(event_log, "r")]
    assert kinds[-3:] == [StepCompleted, SuperstepCommitted, RunCancelled]
    replayed = await replay(event_log, "r")
    assert (replayed.status, replayed.values, replayed.seq) == (
        state.status,
        state.values,
        state.seq,
    )
