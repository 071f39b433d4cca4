"""One racing writer of the contract's concurrent-writers test.

Run as ``python -m tests.contract.writer_proc URL RUN_ID WRITER CLAIMS APPENDS``
it opens the log at URL, prints ``ready``, waits for a line on stdin, races
for RUN_ID and prints a JSON list of the ``[seq, epoch]`` pairs it appended
successfully. The memory backend's test
calls :func:`race` directly, as asyncio tasks sharing one log.
"""

from __future__ import annotations

import asyncio
import json
import sys

import structlog

from agentlog.errors import ConflictError, FencedError
from agentlog.eventlog.base import EventLog
from agentlog.eventlog.events import Event, TaskCompleted
from agentlog.eventlog.urls import open_log


async def race(
    log: EventLog, run_id: str, writer: str, claims: int, appends: int
) -> list[tuple[int, int]]:
    """Claim the run ``claims`` times; after each claim try ``appends`` appends.

    Each append reads the run's last seq and appends the next one. A conflict
    (another writer of the same epoch cannot exist, so it is a stale read)
    is retried; a fence ends this claim's round. Returns what was written.
    """
    written: list[tuple[int, int]] = []
    for _ in range(claims):
        epoch = await log.claim_writer(run_id, owner=writer)
        for _ in range(appends):
            info = await log.find_run(run_id)
            seq = (info.last_seq if info else 0) + 1
            event = Event(
                run_id,
                seq,
                TaskCompleted(key=writer, result={"epoch": epoch, "seq": seq}),
                writer_epoch=epoch,
            )
            try:
                await log.append([event])
            except FencedError:
                break
            except ConflictError:
                continue
            written.append((seq, epoch))
            await asyncio.sleep(0)  # let the other writers in
    return written


async def _main(url: str, run_id: str, writer: str, claims: int, appends: int) -> None:
    log = await open_log(url)
    try:
        # Start together: the parent says go once every writer has its log open.
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        await asyncio.to_thread(sys.stdin.readline)
        written = await race(log, run_id, writer, claims, appends)
    finally:
        await log.close()
    sys.stdout.write(json.dumps(written) + "\n")


if __name__ == "__main__":
    # stdout carries the protocol; logs go to stderr.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    url, run_id, writer, claims, appends = sys.argv[1:6]
    asyncio.run(_main(url, run_id, writer, int(claims), int(appends)))
