"""Bad input to the postgresql:// backend: typed errors that say what to do, nothing lost."""

from __future__ import annotations

import asyncio
import socket

import pytest

from agentlog.errors import BackendUnavailableError, ConfigError, PostgresAuthError
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import Event, TaskCompleted
from agentlog.eventlog.postgres._schema import MIGRATIONS
from tests.services.postgres_server import PASSWORD, PostgresServer


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once it is closed


async def test_server_down_is_retried_then_unavailable_naming_host_and_port() -> None:
    port = _closed_port()
    url = f"postgresql://agentlog:hunter2@127.0.0.1:{port}/agentlog?connect_timeout=1"
    with pytest.raises(BackendUnavailableError) as caught:
        await open_log(url)
    message = str(caught.value)
    assert caught.value.retryable
    assert not isinstance(caught.value, PostgresAuthError)
    assert f"127.0.0.1:{port}" in message and "pg_isready" in message
    assert "hunter2" not in message


async def test_wrong_password_is_an_auth_error_not_retryable(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    url = postgres_url.replace(PASSWORD, "wrong-password")
    with pytest.raises(PostgresAuthError) as caught:
        await open_log(url)
    assert not caught.value.retryable
    assert "password authentication failed" in str(caught.value)
    assert "wrong-password" not in str(caught.value) and PASSWORD not in str(caught.value)


async def test_unknown_database_is_an_auth_error(postgres_server: PostgresServer) -> None:
    with pytest.raises(PostgresAuthError, match="does not exist"):
        await open_log(postgres_server.url("no_such_database"))


@pytest.mark.parametrize(
    "url",
    [
        "postgresql:///agentlog",
        "postgresql://u:p@127.0.0.1:5432/db?connect_timeout=soon",
        "postgresql://u:p@127.0.0.1:5432/db?pool_size=0",
    ],
)
async def test_malformed_url_is_a_config_error_without_the_password(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        await open_log(url)
    assert ":p@" not in str(caught.value)


async def test_empty_database_is_migrated_on_open_by_racing_processes(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    logs = await asyncio.gather(*(open_log(postgres_url) for _ in range(4)))
    for log in logs:
        await log.close()
    name = postgres_url.rsplit("/", 1)[1]
    assert postgres_server.psql("SELECT version FROM agentlog_schema_version", name).split() == [
        str(len(MIGRATIONS))
    ]


async def test_newer_schema_is_refused_and_its_data_kept(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    async with await open_log(postgres_url) as log:
        epoch = await log.claim_writer("kept")
        event = Event("kept", 1, TaskCompleted(key="k", result=1), writer_epoch=epoch)
        await log.append([event])
    name = postgres_url.rsplit("/", 1)[1]
    newer = len(MIGRATIONS) + 1
    postgres_server.psql(f"UPDATE agentlog_schema_version SET version = {newer}", name)
    with pytest.raises(BackendUnavailableError, match="upgrade agentlog") as caught:
        await open_log(postgres_url)
    assert not caught.value.retryable
    postgres_server.psql(f"UPDATE agentlog_schema_version SET version = {len(MIGRATIONS)}", name)
    async with await open_log(postgres_url) as log:
        assert [e async for e in log.read("kept")] == [event]


async def test_tail_wakes_on_another_instances_commit_by_notify(postgres_url: str) -> None:
    """The follower polls once an hour here: only the NOTIFY can wake it."""
    async with await open_log(postgres_url) as writer, await open_log(postgres_url) as follower:
        epoch = await writer.claim_writer("t")
        first = Event("t", 1, TaskCompleted(key="a", result=1), writer_epoch=epoch)
        await writer.append([first])
        stream = follower.tail("t", poll_seconds=3600)
        assert await asyncio.wait_for(anext(stream), 60) == first
        second = Event("t", 2, TaskCompleted(key="b", result=2), writer_epoch=epoch)
        waiting = asyncio.ensure_future(anext(stream))
        await writer.append([second])
        assert await asyncio.wait_for(waiting, 60) == second
        await stream.aclose()
