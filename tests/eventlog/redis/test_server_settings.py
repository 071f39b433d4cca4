"""Redis whose settings would lose events is refused, with the reason and the fix.

Against a real redis-server with no persistence and a password
(``redis_volatile``), whose settings each test changes with CONFIG SET.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentlog.errors import BackendUnavailableError, ConfigError
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.redis import RedisEventLog
from agentlog.eventlog.redis._connection import RedisAuthError, RedisDurabilityError
from agentlog.testing import ev, read_all, started
from tests.services.redis_server import RedisServer, _free_port

pytestmark = pytest.mark.redis


async def _keys(client: Any, prefix: str) -> list[bytes]:
    return [key async for key in client.scan_iter(match=f"{prefix}:*")]


async def test_a_server_without_persistence_is_refused(
    redis_volatile: RedisServer, volatile: Any
) -> None:
    with pytest.raises(RedisDurabilityError) as caught:
        await open_log(redis_volatile.url(prefix="refused"))
    error = caught.value
    assert isinstance(error, ConfigError) and not error.retryable
    assert error.setting == "appendonly"
    message = str(error)
    assert "no persistence" in message and "restart loses" in message
    assert "appendonly yes" in message and "allow_volatile=true" in message
    assert redis_volatile.password not in message
    assert await _keys(volatile, "refused") == []


async def test_allow_volatile_opens_it_and_durable_writes_are_only_acknowledged(
    redis_volatile: RedisServer, volatile: Any
) -> None:
    log = await open_log(redis_volatile.url(prefix="volatile", allow_volatile="true"))
    assert isinstance(log, RedisEventLog) and log.durability == "volatile"
    async with log:
        epoch = await log.claim_writer("r")
        events = [ev("r", 1, started(), epoch), ev("r", 2, epoch=epoch)]
        await log.append(events, durable=True)
        assert await read_all(log, "r") == events


@pytest.mark.parametrize("policy", ["allkeys-lru", "volatile-ttl", "allkeys-random"])
@pytest.mark.parametrize("allow_volatile", ["false", "true"])
async def test_an_evicting_server_is_refused(
    redis_volatile: RedisServer, volatile: Any, policy: str, allow_volatile: str
) -> None:
    await volatile.config_set("appendonly", "yes")
    await volatile.config_set("appendfsync", "always")
    await volatile.config_set("maxmemory-policy", policy)
    with pytest.raises(RedisDurabilityError) as caught:
        await open_log(redis_volatile.url(prefix="evict", allow_volatile=allow_volatile))
    assert caught.value.setting == "maxmemory-policy"
    assert policy in str(caught.value) and "evicts keys" in str(caught.value)
    assert "maxmemory-policy noeviction" in str(caught.value)
    assert await _keys(volatile, "evict") == []


async def test_durable_writes_need_appendfsync_always_or_waitaof(
    redis_volatile: RedisServer, volatile: Any
) -> None:
    await volatile.config_set("appendonly", "yes")
    await volatile.config_set("appendfsync", "everysec")
    version = (await volatile.info("server"))["redis_version"]
    log = await open_log(redis_volatile.url(prefix="everysec"))
    assert isinstance(log, RedisEventLog)
    async with log:
        if tuple(int(p) for p in version.split(".")[:2]) >= (7, 2):
            # WAITAOF makes the write durable before append returns.
            assert log.durability == "waitaof"
            await log.append([ev("r", 1, started())], durable=True)
            assert len(await read_all(log, "r")) == 1
            return
        assert log.durability == "none"
        await log.append([ev("r", 1, started())], durable=False)  # async durability: fine
        with pytest.raises(RedisDurabilityError) as caught:
            await log.append([ev("r", 2)], durable=True)
        assert caught.value.setting == "appendfsync"
        assert "appendfsync always" in str(caught.value) and "WAITAOF" in str(caught.value)
        with pytest.raises(RedisDurabilityError):
            await log.claim_writer("r")
        assert len(await read_all(log, "r")) == 1  # nothing of the refused writes
        assert (await log.get_run("r")).writer_epoch == 0


async def test_the_server_setting_is_checked_not_assumed(
    redis_volatile: RedisServer, volatile: Any
) -> None:
    # The same server, switched to appendfsync always, takes durable writes.
    await volatile.config_set("appendonly", "yes")
    await volatile.config_set("appendfsync", "always")
    log = await open_log(redis_volatile.url(prefix="always"))
    assert isinstance(log, RedisEventLog) and log.durability == "fsync"
    async with log:
        await log.append([ev("r", 1, started())], durable=True)


async def test_wrong_password_is_typed_and_not_retried(
    redis_volatile: RedisServer, volatile: Any
) -> None:
    url = f"redis://:not-the-password@{redis_volatile.host}:{redis_volatile.port}/0"
    with pytest.raises(RedisAuthError) as caught:
        await open_log(url + "?allow_volatile=true&connect_attempts=5")
    assert isinstance(caught.value, BackendUnavailableError) and not caught.value.retryable
    assert "not-the-password" not in str(caught.value)
    assert f"{redis_volatile.host}:{redis_volatile.port}" in str(caught.value)
    assert "redis://:PASSWORD@host:port/db" in str(caught.value)
    no_password = f"redis://{redis_volatile.host}:{redis_volatile.port}/0?allow_volatile=true"
    with pytest.raises(RedisAuthError):
        await open_log(no_password)


async def test_a_server_that_is_down_is_retried_then_named() -> None:
    port = _free_port()  # nothing listens there
    with pytest.raises(BackendUnavailableError) as caught:
        await open_log(f"redis://:pw@127.0.0.1:{port}/0?connect_attempts=3")
    error = caught.value
    assert error.retryable and not isinstance(error, RedisAuthError)
    assert f"127.0.0.1:{port}" in str(error) and "after 3 attempts" in str(error)
    assert "pw@" not in str(error)


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/zero",
        "redis:///0",
        "redis://127.0.0.1:6379/0?prefix=a:b",
        "redis://127.0.0.1:6379/0?allow_volatile=maybe",
        "redis://127.0.0.1:6379/0?unknown=1",
        "redis://:secret@127.0.0.1:6379/0?connect_attempts=0",
    ],
)
async def test_bad_urls_are_config_errors_without_the_password(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        await open_log(url)
    assert "secret" not in str(caught.value)
    assert "redis://" in str(caught.value)


def test_compose_redis_is_one_agentlog_opens_and_the_guide_says_so() -> None:
    import yaml

    repo = Path(__file__).resolve().parents[3]
    redis = yaml.safe_load((repo / "compose.yaml").read_text())["services"]["redis"]
    flags = " ".join(redis["command"])
    for setting in ("--appendonly yes", "--appendfsync always", "--maxmemory-policy noeviction"):
        assert setting in flags
    assert redis["ports"] == ["127.0.0.1:6379:6379"]
    guide = (repo / "docs" / "servers.md").read_text()
    assert "AGENTLOG_LOG=redis://127.0.0.1:6379/0" in guide
    assert "allow_volatile=true" in guide and "noeviction" in guide
