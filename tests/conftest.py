"""Shared fixtures. Service fixtures (Kafka broker, S3 server, PostgreSQL, Redis) live in
tests/services/ and are loaded as plugins here, with the tiers' markers and ``--tier``
(tests/support/tiers.py)."""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Iterator

import pytest
import structlog

pytest_plugins: list[str] = [
    "pytester",
    "tests.support.tiers",
    "tests.services.s3_server",
    "tests.services.kafka_broker",
    "tests.services.postgres_server",
    "tests.services.redis_server",
]

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture
def log_path(tmp_path):  # type: ignore[no-untyped-def]
    """A fresh SQLite log file path."""
    return tmp_path / "agentlog.db"


@pytest.fixture(autouse=True)
def _collect_kafka_leaks(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """Collect garbage after each Kafka test, so that an unclosed connection
    fails the test that leaked it, not whichever test the collector next
    happens to run in."""
    yield
    if request.node.get_closest_marker("kafka") is not None:
        gc.collect()


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """A command run in-process (CliRunner) configures structlog and the
    ``agentlog`` logger, as an application would; put them back after every
    test, wherever it lives, so that no later test runs under its levels."""
    logger = logging.getLogger("agentlog")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    yield
    structlog.reset_defaults()
    logger.handlers[:] = handlers
    logger.setLevel(level)
    logger.propagate = propagate
