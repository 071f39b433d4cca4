"""One of the two processes of ``test_fencing.py``: resume the same run per trial.

Run as ``python -m tests.eventlog.kafka.fence_worker URL NAME``. For each line ``T``
read on stdin it claims run ``trial-T``, prints ``claimed T EPOCH``, waits
for the line ``go``, then resumes the run like a restarted worker would:
read its last seq and append ``STEPS`` events one at a time. It prints one
JSON line per trial: ``{"trial": T, "epoch": E, "written": [...], "fenced": bool}``.
A FencedError ends the trial (the writer stops); any other error ends the
process with a traceback, which fails the test.
"""

from __future__ import annotations

import asyncio
import json
import sys

import structlog

from agentlog.errors import FencedError
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import Event, TaskCompleted

STEPS = 4


async def _main(url: str, name: str) -> None:
    log = await open_log(url)
    loop = asyncio.get_running_loop()
    try:
        while True:
            line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
            if not line:
                return
            trial = int(line)
            run_id = f"trial-{trial}"
            epoch = await log.claim_writer(run_id, owner=name)
            print(f"claimed {trial} {epoch}", flush=True)
            if (await loop.run_in_executor(None, sys.stdin.readline)).strip() != "go":
                return
            written: list[int] = []
            fenced = False
            info = await log.find_run(run_id)
            seq = info.last_seq if info else 0
            try:
                for _ in range(STEPS):
                    seq += 1
                    data = TaskCompleted(key=name, result={"epoch": epoch})
                    await log.append([Event(run_id, seq, data, writer_epoch=epoch)])
                    written.append(seq)
            except FencedError:
                fenced = True
            result = {"trial": trial, "epoch": epoch, "written": written, "fenced": fenced}
            print(json.dumps(result), flush=True)
    finally:
        await log.close()


if __name__ == "__main__":
    # stdout carries the protocol; logs go to stderr.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    asyncio.run(_main(sys.argv[1], sys.argv[2]))
