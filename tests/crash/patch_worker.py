"""The crash worker of ``ctx.patched``: drives one run of the shop workflow, may kill itself.

Usage::

    python -m tests.crash.patch_worker DB RUN_ID CODE EFFECTS GEN \
        [--kill-seq N --kill-when before|after]

CODE is ``old`` (no patch) or ``patched``. The worker starts the run, or
recovers it once the dead writer's lease ran out, answers its approval and
prints ``{"status", "values"}`` when it ends. Each effect appends a line
(``kind key``) to the file EFFECTS. With ``--kill-seq`` it SIGKILLs itself
around the append of seq N (see :class:`tests.crash.worker.KillSwitchLog`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any, Literal

import structlog

from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import RunStatus
from agentlog.projector import load_state
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end
from tests.crash.worker import KillSwitchLog, _wait_for_lease

LEASE_SECONDS = 0.3


def shop_workflow(code: Literal["old", "patched"], effects: Path) -> Workflow:
    """lookup -> charge (old code, or a run past the patch) or charge.v2 -> approval."""
    wf = Workflow("patch-shop", state={"path": "replace", "ok": "replace"})

    def effect(kind: str, idempotency_key: str) -> str:
        with open(effects, "a") as out:
            out.write(f"{kind} {idempotency_key}\n")
        return kind

    @wf.step
    async def pay(ctx: StepContext) -> Any:
        await ctx.task("lookup", effect, "lookup")
        path = "new" if code == "patched" and ctx.patched("fix-42") else "old"
        await ctx.task("charge.v2" if path == "new" else "charge", effect, path)
        ok = ctx.interrupt("ship it?", expects=bool)
        return end(path=path, ok=ok)

    return wf


async def drive(args: argparse.Namespace) -> None:
    log = KillSwitchLog(await open_log(f"sqlite:///{args.db}"), args.kill_seq, args.kill_when)
    wf = shop_workflow(args.code, Path(args.effects))
    config = RuntimeConfig(
        owner=f"gen-{args.gen}:{os.getpid()}", lease_seconds=LEASE_SECONDS, worker=False
    )
    async with log, Runtime(log, workflows=[wf], config=config) as rt:
        info = await log.find_run(args.run_id)
        await _wait_for_lease(log, args.run_id)
        if info is None or info.last_seq == 0:
            await rt.start(wf, run_id=args.run_id, durability="sync")
        elif (await load_state(log, args.run_id)).status == RunStatus.RUNNING:
            assert (await rt.recover()).recovered == [args.run_id]
        state = await rt.wait(args.run_id)
        if state.status == RunStatus.WAITING:
            await rt.resume(args.run_id, True)
            state = await rt.wait(args.run_id)
        print(json.dumps({"status": state.status, "values": state.values}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("run_id")
    parser.add_argument("code", choices=["old", "patched"])
    parser.add_argument("effects")
    parser.add_argument("gen", type=int)
    parser.add_argument("--kill-seq", type=int, default=None)
    parser.add_argument("--kill-when", default="after", choices=["before", "after"])
    args = parser.parse_args()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    asyncio.run(asyncio.wait_for(drive(args), 120))  # hang guard


if __name__ == "__main__":
    main()
