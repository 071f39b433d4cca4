"""Fixtures of the fleet suite: worker processes, the dedup service, a client runtime.

Every process a test starts is killed by a finalizer, whatever the test did.
The helpers they are built from live in tests/support/fleet.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agentlog.runtime import Runtime, RuntimeConfig
from tests.crash import dedup_server
from tests.fleet import app
from tests.support.fleet import Dedup, Fleet


@pytest.fixture
def dedup(tmp_path: Path) -> Iterator[Dedup]:
    """A fresh dedup service in its own process (one per test, so counts are the test's)."""
    db = tmp_path / "dedup.db"
    with dedup_server.running(db) as url:
        yield Dedup(url, db)


@pytest.fixture(params=["sqlite", pytest.param("kafka", marks=pytest.mark.kafka)])
def backend(request: pytest.FixtureRequest) -> str:
    """Both backends, for a test that asks for ``backend`` (or a module marked
    ``usefixtures("backend")``); the others run on SQLite."""
    return str(request.param)


@pytest.fixture
def log_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The client's log: SQLite, or (for a test on ``backend`` kafka) the fleet's
    Kafka topics, in ``KAFKA_PARTITIONS`` partitions (a module's own, else 2)."""
    if "backend" not in request.fixturenames or request.getfixturevalue("backend") == "sqlite":
        return f"sqlite:///{tmp_path / 'fleet.db'}"
    bootstrap = request.getfixturevalue("kafka_bootstrap")
    name = request.getfixturevalue("kafka_name")
    partitions = getattr(request.module, "KAFKA_PARTITIONS", 2)
    return f"kafka://{bootstrap}/{name}?layout=partitioned&partitions={partitions}"


@pytest.fixture
def worker_url(log_url: str) -> str:
    """The log URL the workers open (on Kafka: one consumer group, 6 s sessions)."""
    if not log_url.startswith("kafka://"):
        return log_url
    base, query = log_url.split("?", 1)
    partitions = query.rsplit("partitions=", 1)[1]
    return f"{base}?group=fleet&partitions={partitions}&session_timeout=6"


@pytest.fixture
def fleet(
    worker_url: str, dedup: Dedup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Fleet]:
    """Worker processes on the test's log; every one is killed at the end."""
    logs = tmp_path / "workers"
    logs.mkdir()
    monkeypatch.setenv("FLEET_DEDUP", dedup.url)  # tasks run in the test process too
    fleet = Fleet(worker_url, dedup.url, logs)
    try:
        yield fleet
    finally:
        fleet.close()


@pytest.fixture
async def client(log_url: str) -> AsyncIterator[Runtime]:
    """A client runtime in the test process: it records requests, never executes."""
    config = RuntimeConfig(owner="client", execute=False, worker=False)
    async with await Runtime.open(log_url, workflows=app.workflows, config=config) as rt:
        yield rt
