"""The shipped EventLog contract against the SQLite backend (a real file per test)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.testing import EventLogContract


class TestSqliteEventLog(EventLogContract):
    @pytest.fixture
    async def log(self, log_path: Path) -> AsyncIterator[SqliteEventLog]:
        async with SqliteEventLog(log_path, keep_snapshots=self.keep_snapshots) as log:
            yield log

    @pytest.fixture
    def log_url(self, log_path: Path) -> str:
        return f"sqlite:///{log_path}"


class TestEncryptedSqliteEventLog(EventLogContract):
    """The same contract with payloads sealed at rest (a local keyring per test)."""

    @pytest.fixture
    async def log(self, log_path: Path) -> AsyncIterator[SqliteEventLog]:
        cipher = PayloadCipher(LocalKeyStore(log_path.with_suffix(".keyring")))
        async with SqliteEventLog(
            log_path, keep_snapshots=self.keep_snapshots, cipher=cipher
        ) as log:
            yield log

    @pytest.fixture
    def log_url(self, log_path: Path) -> str:
        # The racing processes write in clear (no keyring): clear and sealed coexist.
        return f"sqlite:///{log_path}"
