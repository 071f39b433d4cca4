"""The child runs crash test's worker: a process that drives a parent run,
which starts three child runs and waits for their results.

Usage::

    python -m tests.crash.family_worker LOG_URL LEASE_SECONDS [--lose-wake]

It prints ``READY`` once its runtime (with its background worker) is open,
then drives whatever the log says needs a driver until it is killed.

With ``--lose-wake`` it SIGKILLs itself when a child run it drove has ended
(its end recorded, its lease released) and before the child's outcome is
sent to its parent: the wake is lost, deterministically, and only the
parent's re-check timer can make up for it. ``lone_parent`` (one child that
ends when it receives a message on ``go``) is the workflow for that.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from agentlog.projector import RunState
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end
from agentlog.runtime._child_host import RuntimeChildHost
from agentlog.runtime._children import parent_of

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


lone_child = Workflow("lone_child", state={"got": "replace"})


@lone_child.step
async def wait_go(ctx: StepContext) -> Any:
    return end(got=await ctx.recv("go"))  # the test sends once the parent parked


lone_parent = Workflow("lone_parent", state={"got": "replace"})


@lone_parent.step
async def await_one(ctx: StepContext) -> Any:
    return end(got=(await ctx.child(lone_child, {}))["got"])


WORKFLOWS = [parent, child, lone_parent, lone_child]


def lose_wakes() -> None:
    """SIGKILL this process between a child's recorded end and its wake."""
    send_wake = RuntimeChildHost.run_ended

    async def run_ended(self: RuntimeChildHost, state: RunState) -> None:
        if parent_of(state) is not None:
            os.kill(os.getpid(), signal.SIGKILL)
        await send_wake(self, state)

    RuntimeChildHost.run_ended = run_ended  # type: ignore[method-assign]


async def main(url: str, lease: float) -> None:
    config = RuntimeConfig(owner=f"family-{os.getpid()}", lease_seconds=lease, worker=True)
    async with await Runtime.open(url, workflows=WORKFLOWS, config=config):
        sys.stdout.write("READY\n")
        sys.stdout.flush()
        await asyncio.Event().wait()  # the background worker drives the runs until SIGKILL


if __name__ == "__main__":
    if "--lose-wake" in sys.argv[3:]:
        lose_wakes()
    asyncio.run(main(sys.argv[1], float(sys.argv[2])))
