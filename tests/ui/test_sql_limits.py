"""The SQL page's bounds: the bytes a result may hold, the queries running at
once, and no file but the archive's readable (DuckDB's ``.tmp`` folder included).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, urlsplit

import httpx
import pytest
from starlette.testclient import TestClient

from agentlog.ui import create_app
from agentlog.ui._actions import CSRF_HEADER
from agentlog.ui._api_sql import SqlLimits
from tests.support.ui import Recorded
from tests.ui.test_hardening import FOREVER

Serve = Callable[..., str]
BOUND = 60.0  # seconds; a bound for a hung server, not a speed requirement

#: 1,001 rows of 100,000 characters: about 100 MB of values in the first rows.
HUGE_ROWS = "SELECT repeat('x', 100000) AS s FROM range(1001)"


def token_of(page: str) -> str:
    return page.split('data-csrf="', 1)[1].split('"', 1)[0]


def wait_until(check: Callable[[], bool], what: str) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` after :data:`BOUND` seconds."""
    deadline = time.monotonic() + BOUND
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {BOUND:g}s waiting until {what}")
        time.sleep(0.05)


@pytest.mark.process
def test_a_result_past_its_byte_limit_is_a_400_that_says_how_to_raise_it(
    recorded: Recorded,
) -> None:
    limits = SqlLimits(timeout=120, max_result_bytes=1_000_000)
    app = create_app(recorded.log_url, recorded.archive_url, sql_limits=limits)
    with TestClient(app, base_url="http://127.0.0.1:8765") as http:
        http.headers[CSRF_HEADER] = token_of(http.get("/sql").text)
        answer = http.get("/api/sql", params={"q": HUGE_ROWS})
        assert answer.status_code == 400, answer.text[:300]
        error = answer.json()["error"]
        assert "1,000,000 bytes" in error and "--sql-max-result" in error, error
        assert len(answer.content) < 2000  # the rows were not sent
        assert http.get("/api/health").json()["sql_running"] == 0
        small = http.get("/api/sql", params={"q": "SELECT repeat('x', 100) AS s FROM range(10)"})
        assert small.status_code == 200 and small.json()["shown"] == 10


@pytest.mark.process
def test_only_the_archives_files_are_readable_from_the_sql_page(
    recorded: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB allows its temporary folder, ``<cwd>/.tmp``, even with external access off."""
    work = tmp_path / "cwd"
    (work / ".tmp").mkdir(parents=True)
    (work / ".tmp" / "notes.txt").write_text("secret-in-tmp-4e1a")
    monkeypatch.chdir(work)
    app = create_app(recorded.log_url, recorded.archive_url)
    with TestClient(app, base_url="http://127.0.0.1:8765") as http:
        http.headers[CSRF_HEADER] = token_of(http.get("/sql").text)
        for path in (".tmp/**", ".tmp/notes.txt", str(work / ".tmp" / "notes.txt")):
            answer = http.get("/api/sql", params={"q": f"SELECT content FROM read_text('{path}')"})
            assert answer.status_code == 400, (path, answer.text[:300])
            assert "secret-in-tmp-4e1a" not in answer.text and "Permission" in answer.text
        runs = http.get("/api/sql", params={"q": "SELECT count(*) FROM runs"})
        assert runs.status_code == 200 and runs.json()["rows"] == [[5]]


def test_queries_past_the_running_cap_are_refused_with_a_429(serve: Serve) -> None:
    """Through the real server and its CLI flags: one query held open, the next refused."""
    url = serve("--sql-max-running", "1", "--sql-timeout", "3600", "--sql-max-result", "1MB")
    where = urlsplit(url)
    with httpx.Client(base_url=url, timeout=BOUND) as http:
        token = token_of(http.get("/sql").text)
        headers = {CSRF_HEADER: token}

        def running() -> int:
            count: int = http.get("/api/health").json()["sql_running"]
            return count

        held = socket.create_connection((where.hostname, where.port), timeout=BOUND)
        try:
            request = (
                f"GET /api/sql?q={quote(FOREVER)} HTTP/1.1\r\nHost: {where.netloc}\r\n"
                f"{CSRF_HEADER}: {token}\r\n\r\n"
            )
            held.sendall(request.encode())
            wait_until(lambda: running() == 1, "the held query runs")
            busy = http.get("/api/sql", params={"q": "SELECT 1"}, headers=headers)
            assert busy.status_code == 429, busy.text
            error = busy.json()["error"]
            assert "1 SQL query is running" in error and "--sql-max-running" in error, error
        finally:
            held.close()  # the client goes away: the held query is stopped
        wait_until(lambda: running() == 0, "the held query is stopped")
        ok = http.get("/api/sql", params={"q": "SELECT 7"}, headers=headers)
        assert ok.status_code == 200 and ok.json()["rows"] == [[7]]
        big = http.get("/api/sql", params={"q": HUGE_ROWS}, headers=headers)
        assert big.status_code == 400 and "1,000,000 bytes" in big.json()["error"]
