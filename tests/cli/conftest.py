"""Fixtures of the CLI tests."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime
from tests.cli.cli_workflows import parked_workflow


@pytest.fixture
def log_url(tmp_path: Path) -> str:
    """A SQLite log holding run ``r1`` of :func:`parked_workflow`, parked on its question."""

    async def build() -> None:
        wf = parked_workflow()
        async with Runtime(SqliteEventLog(str(tmp_path / "log.db")), workflows=[wf]) as rt:
            await rt.start(wf, run_id="r1", durability="sync")
            await rt.wait("r1")

    asyncio.run(build())
    return f"sqlite:///{tmp_path / 'log.db'}"
