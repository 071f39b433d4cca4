"""The shipped EventLog contract against KafkaEventLog on a real Kafka 4.0 broker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog
from agentlog.testing import EventLogContract

pytestmark = pytest.mark.kafka


class TestKafkaEventLog(EventLogContract):
    @pytest.fixture
    async def log(self, kafka_bootstrap: str, kafka_name: str) -> AsyncIterator[KafkaEventLog]:
        config = KafkaConfig(
            bootstrap_servers=kafka_bootstrap,
            name=kafka_name,
            keep_snapshots=self.keep_snapshots,
            partitions=2,
        )
        log = await KafkaEventLog.connect(config)
        async with log:
            yield log

    @pytest.fixture
    def log_url(self, kafka_bootstrap: str, kafka_name: str) -> str:
        return f"kafka://{kafka_bootstrap}/{kafka_name}"


class TestEncryptedKafkaEventLog(EventLogContract):
    """The same contract with payloads sealed at rest (a local keyring per test)."""

    @pytest.fixture
    async def log(
        self, kafka_bootstrap: str, kafka_name: str, tmp_path: Path
    ) -> AsyncIterator[KafkaEventLog]:
        config = KafkaConfig(
            bootstrap_servers=kafka_bootstrap,
            name=kafka_name,
            keep_snapshots=self.keep_snapshots,
            partitions=2,
        )
        cipher = PayloadCipher(LocalKeyStore(tmp_path / "keyring.json"))
        log = await KafkaEventLog.connect(config, cipher=cipher)
        async with log:
            yield log

    @pytest.fixture
    def log_url(self, kafka_bootstrap: str, kafka_name: str) -> str:
        # The racing processes write in clear (no keyring): clear and sealed coexist.
        return f"kafka://{kafka_bootstrap}/{kafka_name}"
