"""The Hypothesis state machine of tests/property/test_eventlog_model.py on PostgreSQL.

One database for the module (a fresh one from the session's server); each
example starts from empty tables.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agentlog.eventlog._base import EventLog
from agentlog.eventlog.postgres import PostgresEventLog
from tests.property.test_eventlog_model import KEEP, MODEL_SETTINGS, EventLogMachine
from tests.services.postgres_server import PostgresServer

_DATABASE: dict[str, str] = {}


@pytest.fixture(autouse=True, scope="module")
def _model_database(postgres_server: PostgresServer) -> Iterator[None]:
    # The machine is a unittest TestCase: it cannot take fixtures, so it finds the URL here.
    _DATABASE["url"] = postgres_server.url(postgres_server.create_database())
    yield
    _DATABASE.clear()


class PostgresMachine(EventLogMachine):
    async def open_log(self, tmp: Path) -> EventLog:
        log = await PostgresEventLog.connect(_DATABASE["url"], keep_snapshots=KEEP)

        async def empty(conn: psycopg.AsyncConnection[Any]) -> None:
            await conn.execute("TRUNCATE agentlog_events, agentlog_runs, agentlog_snapshots")

        await log._call(empty, "truncate")
        return log


TestPostgresModel = PostgresMachine.TestCase
TestPostgresModel.settings = MODEL_SETTINGS
