"""A parent that starts three child runs, and a helper that records a finished
family in a SQLite file, for the tests that show the parent link (CLI, UI)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime, StepContext, Workflow, end
from tests.support.runtime import config

__all__ = ["child", "parent", "run_family"]

child = Workflow("cli_child", state={"n": "replace"})


@child.step
async def double(ctx: StepContext) -> Any:
    return end(n=ctx.state["n"] * 2)


parent = Workflow("cli_parent", state={"ns": "replace"})


@parent.step
async def fan(ctx: StepContext) -> Any:
    handles = [await ctx.start_child(child, {"n": n}) for n in range(3)]
    return end(ns=[(await handle.result())["n"] for handle in handles])


def run_family(db: Path) -> None:
    """Run ``parent`` (run id ``p``) and its three children to the end in ``db``."""

    async def run() -> None:
        async with (
            SqliteEventLog(db) as log,
            Runtime(log, workflows=[parent, child], config=config()) as rt,
        ):
            await rt.start(parent, run_id="p")
            async with asyncio.timeout(30):  # bounded: a hang fails here
                while not (await rt.get_state("p")).is_terminal:  # noqa: ASYNC110 - polls the log
                    await asyncio.sleep(0.05)

    asyncio.run(run())
