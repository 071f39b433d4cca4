"""The streamed workflow, and a process that drives one run of it on SQLite.

Usage::

    python -m tests.support.stream_driver DB_PATH RUN_ID RELEASE_FILE

It starts the run (sync durability), prints ``STARTED``, and waits for the
run to end. The run's first step publishes progress ``{"pct": 50}`` and then
waits until ``RELEASE_FILE`` exists, so the run cannot end before a watcher
in another process saw that progress: what a watcher gets is live, not the
history read back after the end. (The gate is in a step with no parallel
sibling, whose own writes would carry the progress to the log with them.)
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end, goto

#: Every wait here is bounded, so a broken stream fails the test instead of hanging it.
BOUND_SECONDS = 60.0

Gate = Callable[[], Awaitable[None]]


def streamed_workflow(gate: Gate | None = None, name: str = "streamed") -> Workflow:
    """plan -> (left | right) -> finish.

    ``plan`` publishes progress before and after ``gate()``; the parallel
    branch ``left`` publishes its own.
    """
    wf = Workflow(name, state={"notes": "append", "count": "replace"})

    @wf.step
    async def plan(ctx: StepContext) -> Any:
        await ctx.progress({"pct": 50})
        if gate is not None:
            await gate()
        await ctx.progress({"pct": 100})
        return goto("left", "right", notes=["plan"])

    @wf.step(then="finish")
    async def left(ctx: StepContext) -> Any:
        await ctx.progress({"side": "left"})
        return {"notes": ["left"]}

    @wf.step(then="finish")
    async def right(ctx: StepContext) -> Any:
        return {"notes": ["right"]}

    @wf.step
    async def finish(ctx: StepContext) -> Any:
        return end(count=len(ctx.state["notes"]))

    return wf


async def wait_for_file(path: Path) -> None:
    """Return once ``path`` exists (bounded)."""
    async with asyncio.timeout(BOUND_SECONDS):
        # Another process creates it: no event of this process can say so.
        while not await asyncio.to_thread(path.exists):  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def _drive(db: str, run_id: str, release: Path) -> None:
    wf = streamed_workflow(lambda: wait_for_file(release))
    config = RuntimeConfig(owner=f"driver:{os.getpid()}")
    async with Runtime(SqliteEventLog(db), workflows=[wf], config=config) as rt:
        await rt.start(wf, run_id=run_id, durability="sync")
        print("STARTED", flush=True)
        async with asyncio.timeout(BOUND_SECONDS * 2):
            await rt.wait(run_id)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("run_id")
    parser.add_argument("release", type=Path)
    args = parser.parse_args()
    asyncio.run(_drive(args.db, args.run_id, args.release))


if __name__ == "__main__":
    main()
