"""The two processes of ``test_zombie.py``: a writer that stalls, and the new owner.

Usage::

    python -m tests.eventlog.kafka.zombie_worker URL RUN_ID DEDUP_URL zombie DURABILITY before|after
    python -m tests.eventlog.kafka.zombie_worker URL RUN_ID DEDUP_URL owner

The workflow fans out to three branches that each call one side effect
(counted per idempotency key by the dedup service, a separate process).

``zombie`` starts the run. On its first append that holds a TaskStarted it
prints ``STOPPING`` and SIGSTOPs itself, ``before`` the append (once the
other branches queued their intents behind it; it goes out only after
SIGCONT, once the run was taken over, and fails) or ``after`` it (the intent
is durable, the effect not yet begun). After SIGCONT it goes on as its code
does, and prints how its run ended. ``owner`` waits until the zombie's lease
has run out, takes the run over with ``start()`` and completes it.

Nothing in agentlog is patched: the stop is made by a delegating EventLog.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

import structlog

from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import Event, TaskStarted
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end, goto
from tests.crash.worker import KillSwitchLog, _post, _wait_for_lease

LEASE_SECONDS = 1.0
BRANCHES = "abc"
ROLES = {"zombie": 0, "owner": 1}  # the "gen" the dedup service records


def zombie_workflow(run_id: str, dedup: str, gen: int) -> Workflow:
    """plan -> three branches, one side effect each -> done."""
    wf = Workflow("zombie-agent", state={"results": "append", "done": "replace"})

    def effect(branch: str, idempotency_key: str) -> str:
        body = {"run": run_id, "gen": gen, "key": idempotency_key, "kind": "call", "arg": branch}
        return str(_post(f"{dedup}/effect", body)["result"])

    @wf.step
    async def plan(ctx: StepContext) -> Any:
        return goto(*[f"call_{b}" for b in BRANCHES])

    for which in BRANCHES:

        async def call(ctx: StepContext, which: str = which) -> Any:
            return {"results": [await ctx.task("call", effect, which)]}

        wf.step(name=f"call_{which}", then="done")(call)

    @wf.step
    async def done(ctx: StepContext) -> Any:
        return end(done=True)

    return wf


class StopAtIntentLog(KillSwitchLog):
    """SIGSTOPs this process once, around its first append holding a TaskStarted."""

    def __init__(self, inner: Any, when: str) -> None:
        super().__init__(inner, None, when)
        self.stopped = False

    def _maybe_stop(self, events: Sequence[Event], when: str) -> None:
        if self.when != when or self.stopped:
            return
        if _has_intent(events):
            self.stopped = True
            print("STOPPING", flush=True)
            os.kill(os.getpid(), signal.SIGSTOP)

    async def append(self, events: Sequence[Event], *, durable: bool = True) -> None:
        if self.when == "before" and not self.stopped and _has_intent(events):
            # Let the sibling branches emit their intents and queue behind this
            # append (as they would behind a slow commit) before stopping.
            for _ in range(20):
                await asyncio.sleep(0)
        self._maybe_stop(events, "before")
        await self.inner.append(events, durable=durable)
        self._maybe_stop(events, "after")


def _has_intent(events: Sequence[Event]) -> bool:
    return any(isinstance(event.data, TaskStarted) for event in events)


async def drive(url: str, run_id: str, dedup: str, role: str, durability: str, when: str) -> None:
    inner = await open_log(url)
    log = StopAtIntentLog(inner, when) if role == "zombie" else inner
    wf = zombie_workflow(run_id, dedup, ROLES[role])
    config = RuntimeConfig(owner=f"{role}:{os.getpid()}", lease_seconds=LEASE_SECONDS)
    async with log, Runtime(log, workflows=[wf], config=config) as rt:
        if role == "owner":
            await _wait_for_lease(log, run_id)
        try:
            await rt.start(wf, run_id=run_id, input={}, durability=durability)
            state = await rt.wait(run_id)
            outcome = state.status
        except Exception as exc:  # the zombie is meant to be stopped by its fence
            outcome = type(exc).__name__
    print(json.dumps({"role": role, "outcome": outcome}), flush=True)


if __name__ == "__main__":
    # stdout carries the protocol; logs go to stderr.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    url, run_id, dedup, role = sys.argv[1:5]
    durability, when = (sys.argv[5], sys.argv[6]) if role == "zombie" else ("sync", "")
    asyncio.run(asyncio.wait_for(drive(url, run_id, dedup, role, durability, when), 180))
