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
import sys
from typing import Any

from agentlog.runtime import StepContext, Workflow, end, goto
from tests.crash.message_receiver import serve


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


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], busy_receiver(int(sys.argv[2])), float(sys.argv[3])))
