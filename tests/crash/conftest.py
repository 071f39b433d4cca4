"""Fixtures of the crash suite: the dedup service and where each run's log lives.

The one place to add a backend is :data:`CRASH_BACKENDS` plus its branch in
:func:`crash_log_url`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.crash import dedup_server

#: Backends the crash suite kills workers on, each with the marker of its service.
CRASH_BACKENDS = (
    "sqlite",
    pytest.param("kafka", marks=pytest.mark.kafka),
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
)


@pytest.fixture(scope="session")
def dedup_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real HTTP service on 127.0.0.1, in its own process, with its own SQLite file."""
    with dedup_server.running(tmp_path_factory.mktemp("dedup") / "dedup.db") as url:
        yield url


@pytest.fixture(params=CRASH_BACKENDS)
def crash_log_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh log URL on each crash backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'crash.db'}"
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))  # a fresh database
    if request.param == "redis":
        return request.getfixturevalue("redis_url")
    bootstrap = request.getfixturevalue("kafka_bootstrap")
    return f"kafka://{bootstrap}/crash{uuid.uuid4().hex[:10]}"
