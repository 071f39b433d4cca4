"""A PostgreSQL server of this folder's own, which its tests stop and start
(the session's server, ``postgres_server``, stays up for everyone else)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.services.postgres_server import PostgresServer


@pytest.fixture(scope="module")
def own_server() -> Iterator[PostgresServer]:
    """A cluster for this module alone: its tests may stop it."""
    try:
        server = PostgresServer.started()
    except (RuntimeError, OSError) as exc:
        pytest.fail(f"cannot start PostgreSQL for the tests: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.destroy()


@pytest.fixture
def own_url(own_server: PostgresServer) -> str:
    """A fresh database on ``own_server`` (started again if a test left it down)."""
    if not own_server.running():
        own_server.start()
    return own_server.url(own_server.create_database())
