"""The EventLog contract against KafkaEventLog on a real Kafka 4.0 broker."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog
from tests.contract.eventlog_contract import EventLogContract

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
