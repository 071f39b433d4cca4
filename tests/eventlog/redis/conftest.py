"""Fixtures of the Redis backend's own tests: raw clients of the test servers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from tests.services.redis_server import VOLATILE_CONFIG, RedisServer


@pytest.fixture
async def raw(redis_server: RedisServer) -> AsyncIterator[Any]:
    """A plain redis-py client of the durable server, to look at or damage its keys."""
    client = aioredis.Redis(host=redis_server.host, port=redis_server.port)
    yield client
    await client.aclose()


@pytest.fixture
async def volatile(redis_volatile: RedisServer) -> AsyncIterator[Any]:
    """A client of the volatile server, its settings reset to VOLATILE_CONFIG first."""
    client = aioredis.Redis(
        host=redis_volatile.host, port=redis_volatile.port, password=redis_volatile.password
    )
    settings = {k: ("" if v == '""' else v) for k, v in VOLATILE_CONFIG.items()}
    await client.config_set("appendfsync", "everysec")
    for key, value in settings.items():
        await client.config_set(key, value)
    yield client
    await client.aclose()
