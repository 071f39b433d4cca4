"""The shipped EventLog contract against the in-memory backend."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentlog.eventlog.memory import MemoryEventLog
from agentlog.testing import EventLogContract


class TestMemoryEventLog(EventLogContract):
    @pytest.fixture
    async def log(self) -> AsyncIterator[MemoryEventLog]:
        async with MemoryEventLog(keep_snapshots=self.keep_snapshots) as log:
            yield log

    @pytest.fixture
    def log_url(self) -> None:
        return None  # one process only: the writers race as asyncio tasks
