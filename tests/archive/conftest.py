"""Fixtures of the archive tests: a real SQLite hot log and a local archive folder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentlog.archive import LocalArchiveStore
from agentlog.eventlog.sqlite import SqliteEventLog


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
