"""The crash worker of issue 24 items 4 and 8: one run fails, another is cancelled mid-task.

Usage (as ``python -c``, so that this module keeps its name, which is the
recorded type's module)::

    python -c "from tests.crash.failures_worker import main; main()" \\
        LOG_URL GEN [--kill-seq N --kill-when before|after]

It starts (or, after a killed process, recovers) two runs: ``failing``,
whose step raises :class:`PaymentDeclined` (from a ``ConnectionError``) after
a task, and ``long``, whose task sleeps far longer than any test runs, and
which it cancels once the task is running. With ``--kill-seq N`` it SIGKILLs
itself when a batch holding seq >= N is appended (:class:`KillSwitchLog`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

import structlog

from agentlog.errors import LeaseExpiredError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import RunStatus
from agentlog.projector import load_state
from agentlog.runtime import RetryPolicy, Runtime, RuntimeConfig, StepContext, Workflow, end
from tests.crash.worker import LEASE_LOST, KillSwitchLog, _guarded, _wait_for_lease, lease_for

#: Longer than any test runs: only the cancel ends the long task.
FOREVER = 3600.0
FAILING, LONG = "failing", "long"
CANCEL_REASON = "the crash test cancels it mid-task"


class PaymentDeclined(Exception):
    """The workflow's own error: the caller catches it by its class."""


async def _charge(cents: int) -> str:
    return f"authorised {cents}"


async def _crawl() -> str:
    await asyncio.sleep(FOREVER)
    return "never"


def failing_workflow() -> Workflow:
    wf = Workflow("pay", state={"receipt": "replace"}, retry=RetryPolicy(max_attempts=2))

    @wf.step
    async def charge(ctx: StepContext) -> Any:
        receipt = await ctx.task("charge", _charge, 4242)
        try:
            raise ConnectionError(f"gateway reset after {receipt}")
        except ConnectionError as exc:
            raise PaymentDeclined("card 4242 declined") from exc

    return wf


def long_workflow() -> Workflow:
    wf = Workflow("crawl", state={"pages": "replace"})

    @wf.step
    async def crawl(ctx: StepContext) -> Any:
        return end(pages=await ctx.task("crawl", _crawl))

    return wf


async def _task_started(log: EventLog, rt: Runtime) -> None:
    """Until the long run's task has started (or the run ended)."""
    while True:
        state = await rt.get_state(LONG)
        if state.tasks or state.is_terminal:
            return
        await asyncio.sleep(0.01)


async def drive(args: argparse.Namespace) -> None:
    log = KillSwitchLog(await open_log(args.log_url), args.kill_seq, args.kill_when)
    flows = {FAILING: failing_workflow(), LONG: long_workflow()}
    config = RuntimeConfig(
        owner=f"gen-{args.gen}:{os.getpid()}",
        lease_seconds=lease_for(args.log_url),
        worker=False,
    )
    async with log, Runtime(log, workflows=list(flows.values()), config=config) as rt:
        print("READY", flush=True)
        for run_id, wf in flows.items():
            await _wait_for_lease(log, run_id)  # a process that died driving it
            info = await log.find_run(run_id)
            if info is None or info.last_seq == 0:
                await rt.start(wf, run_id=run_id, durability="sync")
            elif (await load_state(log, run_id)).status == RunStatus.RUNNING:
                await rt.recover()
        await _task_started(log, rt)
        cancelled = await rt.cancel(LONG, CANCEL_REASON)
        failed = await rt.wait(FAILING)
        print(json.dumps({LONG: cancelled.status, FAILING: failed.status}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("log_url")
    parser.add_argument("gen", type=int)
    parser.add_argument("--kill-seq", type=int, default=None)
    parser.add_argument("--kill-when", default="after", choices=["before", "after"])
    args = parser.parse_args()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    try:
        asyncio.run(_guarded(drive(args), 60))  # hang guard: a cancel that waits for the task
    except LeaseExpiredError:
        sys.exit(LEASE_LOST)  # too slow to renew its lease: like a kill


#: For ``agentlog worker --app tests.crash.failures_worker:workflows`` (the fleet test).
workflows = [failing_workflow(), long_workflow()]
