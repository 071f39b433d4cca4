"""The EventLog contract against RedisEventLog on a real redis-server
(AOF with ``appendfsync always``, started by tests/services/redis_server.py).

Each test gets a key prefix of its own on the one server, so it starts empty.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.redis import RedisEventLog
from agentlog.testing import EventLogContract

pytestmark = pytest.mark.redis


class TestRedisEventLog(EventLogContract):
    @pytest.fixture
    async def log(self, redis_url: str) -> AsyncIterator[RedisEventLog]:
        log = await open_log(redis_url, keep_snapshots=self.keep_snapshots)
        assert isinstance(log, RedisEventLog)
        async with log:
            yield log

    @pytest.fixture
    def log_url(self, redis_url: str) -> str:
        return redis_url


class TestEncryptedRedisEventLog(EventLogContract):
    """The same contract with payloads sealed at rest (a local keyring per test)."""

    @pytest.fixture
    async def log(self, redis_url: str, tmp_path: Path) -> AsyncIterator[RedisEventLog]:
        cipher = PayloadCipher(LocalKeyStore(tmp_path / "keyring.json"))
        log = await open_log(redis_url, keep_snapshots=self.keep_snapshots, keys=cipher)
        assert isinstance(log, RedisEventLog)
        async with log:
            yield log

    @pytest.fixture
    def log_url(self, redis_url: str) -> str:
        # The racing processes write in clear (no keyring): clear and sealed coexist.
        return redis_url
