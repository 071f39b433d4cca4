"""Fixtures of the Kafka suite (the broker itself is tests/services/kafka_broker.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.crash import dedup_server


@pytest.fixture(scope="module")
def dedup_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The crash suite's effect-counting service, in its own process."""
    with dedup_server.running(tmp_path_factory.mktemp("dedup") / "dedup.db") as url:
        yield url
