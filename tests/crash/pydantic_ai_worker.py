"""The Pydantic AI crash worker: runs (or continues) one agent run, and may kill itself.

Usage::

    python -m tests.crash.pydantic_ai_worker LOG_URL RUN_ID DEDUP_URL GEN \
        [--kill-seq N --kill-when before|after] [--kill-effect N]

It runs the support agent of :mod:`tests.pydantic_ai.agents` as an
``AgentlogAgent``, approves its refund when it parks, and prints the output
as JSON. Every model request and tool call is reported to the dedup service
(a separate process) with its idempotency key before it answers. It
SIGKILLs itself when a batch holding seq >= N is appended (``before`` or
``after`` the append, as tests/crash/worker.py does), or right after the
N-th model request or tool call of this process was delivered and before
its result is recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys

import structlog

from agentlog.errors import LeaseExpiredError
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import RunStatus
from agentlog.projector import load_state
from agentlog.pydantic_ai import AgentlogAgent
from agentlog.runtime import Runtime, RuntimeConfig, current_idempotency_key
from tests.crash.worker import (
    LEASE_LOST,
    KillSwitchLog,
    _guarded,
    _post,
    _wait_for_lease,
    lease_for,
)
from tests.pydantic_ai.agents import support_agent

APPROVAL = {"c3": True}


async def drive(args: argparse.Namespace) -> None:
    delivered = 0

    async def report(kind: str, arg: str) -> None:
        nonlocal delivered
        body = {"run": args.run_id, "gen": args.gen, "key": current_idempotency_key()}
        _post(f"{args.dedup}/effect", {**body, "kind": kind, "arg": arg})
        delivered += 1
        if delivered == args.kill_effect:  # delivered, its result not yet recorded
            os.kill(os.getpid(), signal.SIGKILL)

    durable = AgentlogAgent(support_agent(report))
    log = KillSwitchLog(await open_log(args.log_url), args.kill_seq, args.kill_when)
    config = RuntimeConfig(
        owner=f"gen-{args.gen}:{os.getpid()}", lease_seconds=lease_for(args.log_url), worker=False
    )
    async with log, Runtime(log, workflows=[durable.workflow], config=config) as rt:
        info = await log.find_run(args.run_id)
        await _wait_for_lease(log, args.run_id)  # the killed process's lease
        if info is None or info.last_seq == 0:
            await durable.start(rt, "refund my kettle", run_id=args.run_id)
        elif (await load_state(log, args.run_id)).status == RunStatus.RUNNING:
            assert (await rt.recover()).recovered == [args.run_id]
        while (await rt.wait(args.run_id)).status == RunStatus.WAITING:
            await rt.resume(args.run_id, APPROVAL)
        output = await durable.output(rt, args.run_id)
    print(json.dumps({"output": output}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("log_url")
    parser.add_argument("run_id")
    parser.add_argument("dedup")
    parser.add_argument("gen", type=int)
    parser.add_argument("--kill-seq", type=int, default=None)
    parser.add_argument("--kill-when", default="after", choices=["before", "after"])
    parser.add_argument("--kill-effect", type=int, default=None)
    args = parser.parse_args()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    try:
        asyncio.run(_guarded(drive(args), 120))  # hang guard
    except LeaseExpiredError:
        # Too slow on a loaded machine to renew its short lease: it stopped
        # before its next effect, as a zombie must; the next process takes over.
        sys.exit(LEASE_LOST)


if __name__ == "__main__":
    main()
