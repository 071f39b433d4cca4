"""Fixtures of the archive tests: a real SQLite hot log and a local archive folder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentlog.archive import LocalArchiveStore
from agentlog.eventlog.sqlite import SqliteEventLog

#: A fixed "now", long after the helper runs started, for idleness and TTLs.
NOW = datetime(2024, 3, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
async def hot(tmp_path: Path) -> AsyncIterator[SqliteEventLog]:
    """A real SQLite event log in a temp folder."""
    log = SqliteEventLog(tmp_path / "hot.db")
    try:
        yield log
    finally:
        await log.close()


@pytest.fixture
def store(tmp_path: Path) -> LocalArchiveStore:
    """A local archive folder."""
    return LocalArchiveStore(tmp_path / "archive")
