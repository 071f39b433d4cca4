"""The messages crash test's receiver: a worker process for one run that
receives ``COUNT`` messages on topic "jobs", one per superstep.

Usage::

    python -m tests.crash.message_receiver LOG_URL COUNT LEASE_SECONDS

It prints ``READY`` once its runtime (with its background worker) is open,
then drives whatever the log says needs a driver until it is killed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end, goto


def receiver(count: int) -> Workflow:
    """Each superstep takes one message; the run ends after ``count`` of them."""
    wf = Workflow("receiver", state={"got": "append"})

    @wf.step
    async def take(ctx: StepContext) -> Any:
        value = await ctx.recv("jobs")
        if len(ctx.state.get("got") or []) + 1 >= count:
            return end(got=[value])
        return goto("take", got=[value])

    return wf


async def serve(url: str, wf: Workflow, lease: float) -> None:
    """A worker for ``wf``'s runs: prints READY, then drives them until SIGKILL."""
    config = RuntimeConfig(owner=f"receiver-{os.getpid()}", lease_seconds=lease, worker=True)
    async with await Runtime.open(url, workflows=[wf], config=config):
        sys.stdout.write("READY\n")
        sys.stdout.flush()
        await asyncio.Event().wait()  # the background worker drives the run until SIGKILL


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], receiver(int(sys.argv[2])), float(sys.argv[3])))
