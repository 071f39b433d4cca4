"""The member process of ``test_group_zombie.py``: it appends until it is fenced.

Usage::

    python -m tests.eventlog.kafka.group_zombie BOOTSTRAP NAME RUN_ID

It joins group ``zombies`` alone (so it owns every partition), starts the
run, prints ``READY``, then appends one event at a time, printing
``APPENDED <seq>`` after each commit. The test SIGSTOPs it past its session
timeout, lets another member take the partition over and write, and
SIGCONTs it. Its next write must fail: it prints ``{"outcome": <error>,
"fenced": <is a FencedError>}`` and exits.
"""

from __future__ import annotations

import asyncio
import json
import sys

import structlog

from agentlog.errors import FencedError
from agentlog.eventlog.events import Event, StepCompleted
from tests.eventlog.kafka.group_support import PARTITIONS, open_log, settle, start_run

GROUP = "zombies"
GUARD_S = 240.0


async def main(bootstrap: str, name: str, run_id: str) -> None:
    log = await open_log(bootstrap, name, GROUP)
    outcome: dict[str, object] = {"outcome": "timeout", "fenced": False}
    try:
        await settle([log], lambda: len(log.owned_partitions) == PARTITIONS, "zombie alone")
        await start_run(log, run_id)
        epoch = await log.claim_writer(run_id, owner="zombie")
        print("READY", flush=True)
        seq = 2
        async with asyncio.timeout(GUARD_S):
            while True:
                try:
                    event = Event(run_id, seq, StepCompleted("s", seq, 0, {}), writer_epoch=epoch)
                    await log.append([event])
                except Exception as exc:
                    outcome = {
                        "outcome": type(exc).__name__,
                        "fenced": isinstance(exc, FencedError),
                    }
                    break
                print(f"APPENDED {seq}", flush=True)
                seq += 1
                await asyncio.sleep(0.02)
    except TimeoutError:
        pass
    finally:
        print(json.dumps(outcome), flush=True)
        await log.close()


if __name__ == "__main__":
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    asyncio.run(main(*sys.argv[1:4]))
