"""Racing writers for the contract's several-writers test: tasks, or processes.

Run as ``python -m agentlog.testing._race URL RUN_ID WRITER CLAIMS APPENDS``
it opens the log at URL, prints ``ready``, waits for a line on stdin, races
for RUN_ID and prints a JSON list of the ``[seq, epoch]`` pairs it appended
successfully. :func:`race_in_processes` starts such processes; a log that
lives in one process only races :func:`race` as asyncio tasks instead.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from agentlog.errors import ConflictError, FencedError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import Event, TaskCompleted

__all__ = ["race", "race_in_processes"]

#: The folder that holds the agentlog package being tested, put first on the
#: children's path so that they import this very copy (a checkout or a wheel).
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


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


def race_in_processes(
    url: str, writers: int, claims: int, appends: int, *, run_id: str = "race"
) -> list[list[tuple[int, int]]]:
    """Race ``writers`` processes on ``url`` (see :func:`race`); what each wrote.

    Blocking: call it with :func:`asyncio.to_thread` from a test. The
    processes start together once each has its log open.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    command = [sys.executable, "-m", "agentlog.testing._race", url, run_id]
    procs = [
        subprocess.Popen(
            [*command, f"w{i}", str(claims), str(appends)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(writers)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()  # bounded by the test's timeout
            assert line == "ready\n", (line, proc.stderr.read() if proc.stderr else "")
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            results.append([(seq, epoch) for seq, epoch in json.loads(out)])
        return results
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


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
    url, run_id, writer, claims, appends = sys.argv[1:6]
    asyncio.run(_main(url, run_id, writer, int(claims), int(appends)))
