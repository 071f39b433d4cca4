"""The child runs crash test's worker: a process that drives a parent run,
which starts three child runs and waits for their results.

Usage::

    python -m tests.crash.family_worker LOG_URL LEASE_SECONDS

It prints ``READY`` once its runtime (with its background worker) is open,
then drives whatever the log says needs a driver until it is killed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end

#: How many children the parent starts.
CHILDREN = 3

child = Workflow("family_child", state={"n": "replace", "out": "replace"})


async def _work(n: int) -> int:
    await asyncio.sleep(0.4 * n)  # the children end at different moments
    return n * 10


@child.step
async def work(ctx: StepContext) -> Any:
    return end(out=await ctx.task("work", _work, ctx.state["n"]))


parent = Workflow("family_parent", state={"outs": "replace"})


@parent.step
async def fan(ctx: StepContext) -> Any:
    handles = [await ctx.start_child(child, {"n": n}) for n in range(1, CHILDREN + 1)]
    return end(outs=[(await handle.result())["out"] for handle in handles])


async def main(url: str, lease: float) -> None:
    config = RuntimeConfig(owner=f"family-{os.getpid()}", lease_seconds=lease, worker=True)
    async with await Runtime.open(url, workflows=[parent, child], config=config):
        sys.stdout.write("READY\n")
        sys.stdout.flush()
        await asyncio.Event().wait()  # the background worker drives the runs until SIGKILL


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2])))
