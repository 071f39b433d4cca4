"""``agentlog recover``'s runs held by a lease: naming them, and ``--wait`` for them.

Right after a crash, the dead writer's lease still lives until it runs out
(``--lease``, 30 s by default), and ``Runtime.recover`` leaves such a run
alone, since by the log alone a dead writer looks like a live one that has
not renewed yet. So ``recover`` names each such run, its writer and when
the lease ends; ``--wait`` waits for those leases and recovers each run
whose lease ran out. A writer that renews its lease meanwhile (or another
writer that claims the run) is alive: that run is left to it.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

from rich.text import Text

from agentlog.cli._render import err
from agentlog.eventlog._base import RunInfo
from agentlog.eventlog.events import RunStatus, utcnow
from agentlog.runtime import RecoveryReport, Runtime

__all__ = ["held_json", "held_line", "wait_for_leases"]

#: Seconds between two progress lines while ``--wait`` waits.
_PROGRESS_EVERY = 5.0
#: The longest sleep between two looks at the held runs' index rows.
_LOOK_EVERY = 1.0


def _left(info: RunInfo, now: datetime) -> float:
    expires = info.lease_expires_at
    return 0.0 if expires is None else max(0.0, (expires - now).total_seconds())


def _until(info: RunInfo) -> str:
    expires = info.lease_expires_at
    return "" if expires is None else f"{expires:%Y-%m-%d %H:%M:%S} UTC"


def held_line(info: RunInfo, now: datetime | None = None) -> str:
    """What ``recover`` says of a run a live lease holds."""
    left = _left(info, now or utcnow())
    return (
        f"run {info.run_id} not recovered yet: writer {info.lease_owner!r} holds its lease "
        f"until {_until(info)} (in {left:.0f} s); if that writer died, "
        "`agentlog recover --wait` takes the run over when the lease ends"
    )


def held_json(info: RunInfo, now: datetime | None = None) -> dict[str, Any]:
    """A run a live lease holds, for ``--json``."""
    return {
        "run_id": info.run_id,
        "writer": info.lease_owner,
        "lease_expires_at": info.lease_expires_at,
        "seconds_left": round(_left(info, now or utcnow()), 1),
    }


def _say(message: str) -> None:
    err.print(Text(message), soft_wrap=True)


async def wait_for_leases(
    runtime: Runtime, report: RecoveryReport, *, progress: bool
) -> RecoveryReport:
    """Wait until each run ``report`` found held is free, recovering it then.

    Returns ``report`` with the runs recovered meanwhile added, and ``held``
    narrowed to the runs whose writer showed it is alive (it renewed its
    lease, or another writer claimed the run): those are left to it. A run
    that stopped running meanwhile (it ended, parked, or was cancelled) is
    dropped: there is nothing to recover.
    """
    waiting = {info.run_id: info for info in report.held}
    alive: list[RunInfo] = []
    said = -_PROGRESS_EVERY
    while waiting:
        now = utcnow()
        free = False
        for run_id, seen in list(waiting.items()):
            info = await runtime.log.find_run(run_id)
            if info is None or info.status != RunStatus.RUNNING:
                del waiting[run_id]
            elif _renewed(seen, info):
                del waiting[run_id]
                alive.append(info)
                if progress:
                    owner = info.lease_owner
                    _say(f"run {run_id}: writer {owner!r} renewed its lease: it is alive")
            elif _left(info, now) == 0:
                del waiting[run_id]
                free = True
        if free:
            found = await runtime.recover()
            report.recovered.extend(r for r in found.recovered if r not in report.recovered)
            report.failed.update(found.failed)
        if not waiting:
            break
        soonest = min(_left(info, now) for info in waiting.values())
        if progress and time.monotonic() - said >= _PROGRESS_EVERY:
            said = time.monotonic()
            runs = ", ".join(f"{r} in {_left(i, now):.0f} s" for r, i in sorted(waiting.items()))
            _say(f"waiting for {len(waiting)} lease(s) to end: {runs}")
        await asyncio.sleep(min(_LOOK_EVERY, max(soonest, 0.05)))
    report.held[:] = alive
    return report


def _renewed(seen: RunInfo, now: RunInfo) -> bool:
    """True if a writer renewed or claimed the run since ``seen``: it is alive."""
    if now.writer_epoch != seen.writer_epoch and now.lease_expires_at is not None:
        return True
    before, after = seen.lease_expires_at, now.lease_expires_at
    return before is not None and after is not None and after > before
