"""The OpenAI Agents SDK crash worker: runs (or continues) one agent run, and may kill itself.

Usage::

    python -m tests.crash.openai_agents_worker LOG_URL RUN_ID JOURNAL GEN \
        [--kill-seq N --kill-when before|after] [--segments]

It prints ``READY`` once its runtime is open. With ``--kill-seq N`` it
SIGKILLs itself when a batch holding seq >= N is appended, ``before`` or
``after`` the append (tests/crash/worker.py's KillSwitchLog). Every call of
the fake model and of a tool is appended to JOURNAL (one JSON line
``[gen, kind, idempotency key]``, flushed and fsynced before the call
returns), so the test sees what ran in a process that was killed. An
approval is answered True. The last line on stdout is the final report.
With ``--segments`` the agents run as ``agent_workflow`` (one step per agent
segment, the question in the state's ``input``) instead of ``run_agent`` in
one step.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

import structlog

from agentlog.errors import LeaseExpiredError, LeaseHeldError
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import RunStatus
from agentlog.projector import load_state
from agentlog.runtime import Runtime, RuntimeConfig
from tests.crash.worker import LEASE_LOST, KillSwitchLog, _wait_for_lease
from tests.openai_agents.agents_app import Record, support_agent_workflow, support_workflow

QUESTION = {"question": "refund order 42"}
#: the writer lease: a killed worker's successor waits it out, so it is short
LEASE_SECONDS = 1.0


def journal(path: str, gen: int) -> Record:
    """``record(kind, key)``: one durable line per call."""

    def record(kind: str, key: str) -> None:
        with open(path, "a") as out:
            out.write(json.dumps([gen, kind, key]) + "\n")
            out.flush()
            os.fsync(out.fileno())

    return record


async def drive(args: argparse.Namespace) -> None:
    log = KillSwitchLog(await open_log(args.log_url), args.kill_seq, args.kill_when)
    record = journal(args.journal, args.gen)
    if args.segments:
        wf, question = support_agent_workflow(record), {"input": QUESTION["question"]}
    else:
        wf, question = support_workflow(record), QUESTION
    config = RuntimeConfig(owner=f"gen-{args.gen}:{os.getpid()}", lease_seconds=args.lease)
    async with log, Runtime(log, workflows=[wf], config=config) as rt:
        print("READY", flush=True)
        await _wait_for_lease(log, args.run_id)  # a process that was killed holding it
        info = await log.find_run(args.run_id)
        if info is None or info.last_seq == 0:
            await rt.start(wf, run_id=args.run_id, input=question)
        elif (await load_state(log, args.run_id)).status == RunStatus.RUNNING:
            await rt.start(wf, run_id=args.run_id)
        while (state := await rt.wait(args.run_id)).status == RunStatus.WAITING:
            try:
                await rt.resume(args.run_id, True)
            except LeaseHeldError:  # the parking process died before releasing
                await _wait_for_lease(log, args.run_id)
        print(json.dumps({"status": state.status, "values": state.values}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("log_url")
    parser.add_argument("run_id")
    parser.add_argument("journal")
    parser.add_argument("gen", type=int)
    parser.add_argument("--kill-seq", type=int, default=None)
    parser.add_argument("--kill-when", default="after", choices=["before", "after"])
    parser.add_argument("--segments", action="store_true")
    parser.add_argument("--lease", type=float, default=LEASE_SECONDS)
    args = parser.parse_args()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    try:
        asyncio.run(asyncio.wait_for(drive(args), 180))  # hang guard
    except LeaseExpiredError:  # too slow to renew on a loaded machine: the next one takes over
        sys.exit(LEASE_LOST)


if __name__ == "__main__":
    main()
