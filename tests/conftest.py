"""Shared fixtures. Service fixtures (Kafka broker, S3 server) live in
tests/services/ and are loaded as plugins here."""

from __future__ import annotations

import os

import pytest

pytest_plugins: list[str] = ["tests.services.s3_server", "tests.services.kafka_broker"]

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture
def log_path(tmp_path):  # type: ignore[no-untyped-def]
    """A fresh SQLite log file path."""
    return tmp_path / "agentlog.db"
