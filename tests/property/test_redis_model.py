"""The Hypothesis state machine of test_eventlog_model on a real redis-server.

Each example gets a key prefix of its own on the session's durable server
(tests/services/redis_server.py), so it starts from an empty log.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis.stateful import run_state_machine_as_test

from agentlog.eventlog._base import EventLog
from agentlog.eventlog._urls import open_log
from tests.property.test_eventlog_model import KEEP, MODEL_SETTINGS, EventLogMachine
from tests.services.redis_server import RedisServer

pytestmark = pytest.mark.redis


def test_redis_matches_the_model(redis_server: RedisServer) -> None:
    class RedisMachine(EventLogMachine):
        async def open_log(self, tmp: Path) -> EventLog:
            url = redis_server.url(prefix=f"model{uuid.uuid4().hex[:12]}")
            return await open_log(url, keep_snapshots=KEEP)

    run_state_machine_as_test(RedisMachine, settings=MODEL_SETTINGS)
