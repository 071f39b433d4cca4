"""The UI tests' recorded log: the runs every UI test looks at."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agentlog.archive import Archiver, open_archive
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime, RuntimeConfig
from tests.ui.ui_workflows import HOSTILE, approval_workflow, fanout_workflow


@dataclass(frozen=True)
class Recorded:
    """The recorded log and archive, and the run ids in them."""

    log_url: str
    archive_url: str
    db: Path


async def record(db: Path, archive_url: str) -> None:
    """Record the UI tests' runs (see the ``recorded`` fixture) in ``db`` and the archive."""
    fan, approve = fanout_workflow(), approval_workflow()
    log = SqliteEventLog(str(db))
    config = RuntimeConfig(worker=False)
    async with Runtime(log, workflows=[fan, approve], config=config) as rt:
        for run_id, topic in (("fan-1", "tides"), ("xss-1", HOSTILE), ("old-1", "archived")):
            await rt.start(fan, run_id=run_id, input={"topic": topic}, durability="sync")
            await rt.wait(run_id)
        for run_id in ("wait-live", "wait-act"):
            await rt.start(approve, run_id=run_id, input={"draft": run_id}, durability="sync")
            await rt.wait(run_id)
        async with SqliteEventLog(str(db)) as hot:
            await Archiver(hot, open_archive(archive_url)).run(run_ids=["old-1"])
