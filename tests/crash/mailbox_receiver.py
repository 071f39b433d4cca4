"""The mailbox crash test's receiver: a worker process for one run whose
steps hold it (a slow task) while messages arrive for it in its mailbox.

Usage::

    python -m tests.crash.mailbox_receiver LOG_URL COUNT LEASE_SECONDS

Each superstep runs a task that takes a while (so the run is held by this
process's writer when most sends arrive), then takes one message of topic
"a" and one of "b"; the run ends after ``COUNT`` of each. It prints
``READY`` once its runtime (with its background worker) is open, then drives
whatever the log says needs a driver until it is killed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end, goto


async def _work(n: int) -> int:
    await asyncio.sleep(0.05)  # holds the run while sends arrive
    return n


def busy_receiver(count: int) -> Workflow:
    """Each superstep works a while, then takes a message of "a" and one of "b"."""
    wf = Workflow("busy", state={"a": "append", "b": "append"})

    @wf.step
    async def take(ctx: StepContext) -> Any:
        done = len(ctx.state.get("a") or [])
        await ctx.task("work", _work, done)
        a, b = await ctx.recv("a"), await ctx.recv("b")
        if done + 1 >= count:
            return end(a=[a], b=[b])
        return goto("take", a=[a], b=[b])

    return wf


async def main(url: str, count: int, lease: float) -> None:
    config = RuntimeConfig(owner=f"receiver-{os.getpid()}", lease_seconds=lease, worker=True)
    async with await Runtime.open(url, workflows=[busy_receiver(count)], config=config):
        sys.stdout.write("READY\n")
        sys.stdout.flush()
        await asyncio.Event().wait()  # the background worker drives the run until SIGKILL


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
