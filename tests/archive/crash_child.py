"""Child process of the crash test: one archive pass, printing a line per file.

Usage: python crash_child.py HOT_DB ARCHIVE_DIR
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime

from agentlog.archive import Archiver, ArchiverConfig, LocalArchiveStore
from agentlog.eventlog.sqlite import SqliteEventLog


async def main(db: str, folder: str) -> None:
    log = SqliteEventLog(db)

    def progress(runs: int, events: int, total_runs: int, total_events: int) -> None:
        sys.stdout.write(f"file {runs} {events}\n")
        sys.stdout.flush()

    sys.stdout.write("ready\n")
    sys.stdout.flush()
    archiver = Archiver(log, LocalArchiveStore(folder), ArchiverConfig(max_events_per_file=40))
    await archiver.run(now=datetime(2024, 3, 2, 12, tzinfo=UTC), progress=progress)
    await log.close()
    sys.stdout.write("done\n")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
