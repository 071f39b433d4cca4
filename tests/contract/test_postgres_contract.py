"""The EventLog contract against PostgresEventLog on a real PostgreSQL server
(a fresh database per test, see tests/services/postgres_server.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.eventlog.postgres import PostgresEventLog
from agentlog.testing import EventLogContract


class TestPostgresEventLog(EventLogContract):
    @pytest.fixture
    async def log(self, postgres_url: str) -> AsyncIterator[PostgresEventLog]:
        log = await PostgresEventLog.connect(postgres_url, keep_snapshots=self.keep_snapshots)
        async with log:
            yield log

    @pytest.fixture
    def log_url(self, postgres_url: str) -> str:
        return postgres_url


class TestEncryptedPostgresEventLog(EventLogContract):
    """The same contract with payloads sealed at rest (a local keyring per test)."""

    @pytest.fixture
    async def log(self, postgres_url: str, tmp_path: Path) -> AsyncIterator[PostgresEventLog]:
        cipher = PayloadCipher(LocalKeyStore(tmp_path / "keyring.json"))
        log = await PostgresEventLog.connect(
            postgres_url, keep_snapshots=self.keep_snapshots, cipher=cipher
        )
        async with log:
            yield log

    @pytest.fixture
    def log_url(self, postgres_url: str) -> str:
        # The racing processes write in clear (no keyring): clear and sealed coexist.
        return postgres_url
