"""A log URL's credentials never reach the UI: not its page header, not ``/api/health``."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from starlette.testclient import TestClient

from agentlog.eventlog._urls import open_log
from agentlog.ui import create_app


async def _with_password_parameter(postgres_url: str) -> str:
    """``postgres_url`` with its password moved into a ``?password=`` parameter."""
    parts = urlsplit(postgres_url)
    assert parts.password, "the test server's URL carries a password"
    url = (
        f"postgresql://{parts.username}@{parts.hostname}:{parts.port}{parts.path}"
        f"?password={parts.password}"
    )
    async with await open_log(url):  # it works, and the log now exists
        pass
    return url


async def test_the_header_and_health_mask_a_password_parameter(
    postgres_url: str, tmp_path: Path
) -> None:
    url = await _with_password_parameter(postgres_url)
    password = urlsplit(postgres_url).password
    assert password
    app = create_app(url, f"file://{tmp_path / 'no-archive'}")
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        health = client.get("/api/health")
        page = client.get("/")
    assert health.status_code == 200 and page.status_code == 200
    assert health.json()["log"].endswith("?password=***")
    for body in (health.text, page.text):
        assert password not in body
    assert "password=***" in page.text
