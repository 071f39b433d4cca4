"""A PostgreSQL server of this folder's own, which its tests stop and start
(the session's server, ``postgres_server``, stays up for everyone else)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.services.postgres_server import PostgresServer, fresh_database_url, serving


@pytest.fixture(scope="module")
def own_server() -> Iterator[PostgresServer]:
    """A cluster for this module alone: its tests may stop it."""
    with serving() as server:
        yield server


@pytest.fixture
def own_url(own_server: PostgresServer) -> str:
    """A fresh database on ``own_server`` (started again if a test left it down)."""
    return fresh_database_url(own_server)
