"""LangGraph's published conformance suite against AgentlogSaver, on SQLite, PostgreSQL and Kafka.

``langgraph-checkpoint-conformance`` runs every base capability (put,
put_writes, get_tuple, list, delete_thread) and the extended ones the saver
implements (delete_for_runs, copy_thread, prune); every one must pass.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.initializer import RegisteredCheckpointer

from agentlog.langgraph import AgentlogSaver
from tests.services.postgres_server import PostgresServer, fresh_database_url

EXTENDED = {"delete_for_runs", "copy_thread", "prune"}


def registered(url_for: object, snapshot_every: int = 200) -> RegisteredCheckpointer:
    """A conformance registration whose factory opens a fresh saver on ``url_for()``."""

    async def factory() -> AsyncIterator[AgentlogSaver]:
        url = url_for()  # type: ignore[operator]
        async with AgentlogSaver.from_url(url, snapshot_every=snapshot_every) as saver:
            yield saver

    return checkpointer_test(name=f"AgentlogSaver-{uuid.uuid4().hex[:6]}")(factory)


async def check_conformance(registration: RegisteredCheckpointer) -> None:
    report = await validate(registration)
    failures = {name: result.failures for name, result in report.results.items() if result.failures}
    assert report.passed_all_base(), failures
    for name in EXTENDED:
        result = report.results[name]
        assert result.detected and result.passed, (name, result)


async def test_conformance_on_sqlite(tmp_path: Path) -> None:
    count = iter(range(100))
    await check_conformance(registered(lambda: f"sqlite:///{tmp_path}/log{next(count)}.db"))


async def test_conformance_on_sqlite_with_a_snapshot_every_two_events(tmp_path: Path) -> None:
    # After each snapshot the saver keeps only the latest checkpoints: every
    # older read, list and removal goes through the thread's history.
    count = iter(range(100))
    await check_conformance(
        registered(lambda: f"sqlite:///{tmp_path}/log{next(count)}.db", snapshot_every=2)
    )


async def test_conformance_on_postgresql(postgres_server: PostgresServer) -> None:
    await check_conformance(registered(lambda: fresh_database_url(postgres_server)))


@pytest.mark.kafka
async def test_conformance_on_kafka(kafka_bootstrap: str) -> None:
    await check_conformance(
        registered(lambda: f"kafka://{kafka_bootstrap}/lgconf{uuid.uuid4().hex[:8]}")
    )
