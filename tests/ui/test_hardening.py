"""The UI's HTTP surface under hostile or awkward input: numbers, run ids,
SQL results, server errors, the token on SQL, and which Host names it serves.

Starlette's TestClient runs the real app (lifespan included) in-process.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient
from typer.testing import CliRunner

from agentlog.cli import app as cli_app
from agentlog.errors import ConfigError
from agentlog.eventlog import Event, RunCompleted, RunStarted, StepCompleted, SuperstepCommitted
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.ui import create_app
from agentlog.ui._actions import CSRF_HEADER
from agentlog.ui._api_sql import MAX_CELL, MAX_ROWS, SqlLimits
from agentlog.ui._app import LOOPBACK_HOSTS, SECURITY_HEADERS, is_loopback, served_hosts
from agentlog.ui._params import decode_run_id, encode_run_id
from tests.cli.test_sql_values import UNREPRESENTABLE
from tests.support.ui import Recorded
from tests.ui.ui_workflows import workflows

Serve = Callable[..., str]
BOUND = 60.0  # seconds; a bound for a hung page, not a speed requirement

#: Run ids a URL path mangles: slashes, route suffixes, dot segments, URL
#: syntax, percent signs, the escape character, non-ASCII and markup.
AWKWARD = (
    "a/b/c",
    "x/events",
    "x/state/3",
    "x/timeline",
    "x/live",
    "x/origin",
    ".",
    "..",
    "../..",
    ".hidden",
    "q?x=1",
    "h#frag",
    "pct%2Fenc",
    "tilde~s",
    "~",
    "/lead",
    "trail/",
    "ünï💥",
    "<script>alert(1)</script>",
    "sp ace",
)


def record_runs(recorded: Recorded, run_ids: tuple[str, ...]) -> None:
    """A completed one-step run (seq 1..4, input ``{"id": run_id}``) under each id."""

    async def record() -> None:
        async with SqliteEventLog(str(recorded.db)) as log:
            for run_id in run_ids:
                epoch = await log.claim_writer(run_id)
                data: list[Any] = [
                    RunStarted("odd", "1", {"id": run_id}, "sync", "fp", start=["s"]),
                    StepCompleted("s", 0, 0, {}, []),
                    SuperstepCommitted(0, ["s"]),
                    RunCompleted(),
                ]
                events = [Event(run_id, n, d, writer_epoch=epoch) for n, d in enumerate(data, 1)]
                await log.append(events)

    asyncio.run(record())


def api(run_id: str, suffix: str = "") -> str:
    return "/api/runs/" + quote(encode_run_id(run_id), safe="") + suffix


@pytest.fixture
def client(recorded: Recorded) -> Iterator[TestClient]:
    record_runs(recorded, AWKWARD)
    app = create_app(recorded.log_url, recorded.archive_url)
    with TestClient(app, base_url="http://127.0.0.1:8765") as open_client:
        yield open_client


def test_a_seq_or_number_that_is_not_ascii_digits_is_a_400(client: TestClient) -> None:
    # superscript 2, Arabic-Indic 3, fullwidth 3, and what int() takes besides digits
    for raw in ("%C2%B2", "%D9%A3", "%EF%BC%93", "+3", "3_0", "%203"):
        answer = client.get("/api/runs/fan-1/state/" + raw)
        assert answer.status_code == 400, raw
        assert "not a whole number" in answer.json()["error"], raw
    for name in ("after", "limit"):
        for raw in ("\u00b2", "\u0663", "\uff13", "1e3"):
            answer = client.get("/api/runs/fan-1/events", params={name: raw})
            assert answer.status_code == 400 and "not a whole number" in answer.json()["error"]
    answer = client.get("/api/runs", params={"offset": "٣"})
    assert answer.status_code == 400
    assert client.get("/api/runs/fan-1/state/3").json()["seq"] == 3


def test_the_run_id_encoding_round_trips() -> None:
    for run_id in (*AWKWARD, "", "plain", "~~", "~s", "a.b", "..."):
        segment = encode_run_id(run_id)
        assert "/" not in segment and segment.strip(".") != "", run_id
        assert decode_run_id(segment) == run_id
    assert encode_run_id("fan-1") == "fan-1"


def test_every_awkward_run_id_reaches_its_own_run(recorded: Recorded, serve: Serve) -> None:
    """Through the real server: Starlette's TestClient decodes a path twice."""
    record_runs(recorded, AWKWARD)
    url = serve().rstrip("/")
    with httpx.Client(base_url=url, timeout=60) as http:
        for run_id in AWKWARD:
            info = http.get(api(run_id))
            assert info.status_code == 200, (run_id, info.text)
            assert info.json()["run_id"] == run_id and info.json()["last_seq"] == 4
            events = http.get(api(run_id, "/events")).json()["events"]
            assert [e["seq"] for e in events] == [1, 2, 3, 4], run_id
            assert events[0]["payload"]["input"] == {"id": run_id}
            assert http.get(api(run_id, "/state/1")).json()["seq"] == 1, run_id
            assert http.get(api(run_id, "/timeline")).status_code == 200, run_id
            assert http.get(api(run_id, "/origin")).json() == {"forked_from": None}
            page = http.get("/runs/" + quote(encode_run_id(run_id), safe=""))
            assert page.status_code == 200, run_id
            assert "<script>alert" not in page.text


def test_a_bad_escape_in_a_run_segment_is_a_400(client: TestClient) -> None:
    answer = client.get("/api/runs/bad~x")
    assert answer.status_code == 400 and "'~'" in answer.json()["error"]


def test_the_pages_of_dot_dot_and_x_events_open_in_a_browser(
    recorded: Recorded, serve: Serve, browser: WebDriver
) -> None:
    """The runs page links to them, and their pages load their own events."""
    record_runs(recorded, ("..", "x/events"))
    url = serve()
    for run_id in ("..", "x/events"):
        browser.get(url)
        wait = WebDriverWait(browser, BOUND)
        wait.until(lambda d: d.find_element(By.ID, "main").get_attribute("data-ready") == "1")
        links = browser.find_elements(By.CSS_SELECTOR, "a.run-link")
        next(a for a in links if a.text == run_id).click()
        title = f"Run {run_id}"
        wait.until(lambda d, title=title: d.find_element(By.CSS_SELECTOR, "h1").text == title)
        wait.until(lambda d: d.find_element(By.ID, "main").get_attribute("data-ready") == "1")
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "tr.event")) == 4)
        wait.until(lambda d: d.find_element(By.ID, "timeline").get_attribute("data-drawn"))


def test_a_500_carries_the_security_headers_and_no_traceback(recorded: Recorded) -> None:
    async def broken(request: Request) -> Response:
        raise RuntimeError("secret detail /etc/agentlog")

    app = create_app(recorded.log_url, recorded.archive_url)
    # A test-only route that fails the way a bug would, ahead of the real ones.
    app.router.routes.insert(0, Route("/api/broken", broken))
    app.router.routes.insert(0, Route("/broken", broken))
    with TestClient(app, base_url="http://127.0.0.1:8765", raise_server_exceptions=False) as http:
        for path in ("/api/broken", "/broken"):
            answer = http.get(path)
            assert answer.status_code == 500, path
            for name, value in SECURITY_HEADERS.items():
                assert answer.headers[name] == value, (path, name)
            assert "Traceback" not in answer.text and "secret detail" not in answer.text
            assert "internal error" in answer.text
        assert http.get("/api/broken").json()["status"] == 500


#: A query that would run for hours: it only ends when it is interrupted.
FOREVER = "SELECT sum(x) FROM range(30000000000) t(x)"


def _with_token(http: TestClient) -> TestClient:
    page = http.get("/sql").text
    http.headers[CSRF_HEADER] = page.split('data-csrf="', 1)[1].split('"', 1)[0]
    return http


@pytest.fixture
def sql(recorded: Recorded) -> Iterator[TestClient]:
    """A read-only UI whose queries stop after a fifth of a second, with the page's token."""
    app = create_app(recorded.log_url, recorded.archive_url, sql_limits=SqlLimits(timeout=0.2))
    with TestClient(app, base_url="http://127.0.0.1:8765") as http:
        yield _with_token(http)


@pytest.mark.process
@pytest.mark.parametrize(("query", "text"), UNREPRESENTABLE)
def test_a_sql_value_python_cannot_hold_is_shown_as_duckdbs_text(
    sql: TestClient, query: str, text: str
) -> None:
    answer = sql.get("/api/sql", params={"q": query + ", 1 AS n"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["rows"] == [[text, 1]]


@pytest.mark.process
def test_sql_without_the_pages_token_or_from_another_site_is_refused(sql: TestClient) -> None:
    token = sql.headers.pop(CSRF_HEADER)
    for headers in (
        {},
        {CSRF_HEADER: "guess"},
        {CSRF_HEADER: token, "origin": "http://evil.example"},
    ):
        answer = sql.get("/api/sql", params={"q": "SELECT 1"}, headers=headers)
        assert answer.status_code == 403, headers
        assert "refused" in answer.json()["error"]
    ok = sql.get("/api/sql", params={"q": "SELECT 1"}, headers={CSRF_HEADER: token})
    assert ok.status_code == 200


@pytest.mark.process
def test_a_query_past_the_time_limit_is_stopped_and_the_next_one_runs(sql: TestClient) -> None:
    answer = sql.get("/api/sql", params={"q": FOREVER})
    assert answer.status_code == 400
    assert "longer than 0.2 s" in answer.json()["error"]
    assert "--sql-timeout" in answer.json()["error"]
    assert sql.get("/api/health").json()["sql_running"] == 0
    assert sql.get("/api/sql", params={"q": "SELECT 42"}).json()["rows"] == [[42]]


def test_a_query_whose_client_went_away_is_stopped(serve: Serve) -> None:
    """Through the real server (the client closes its connection), with no time limit in reach."""
    url = serve("--sql-timeout", "3600")
    with httpx.Client(base_url=url, timeout=60) as http:
        page = http.get("/sql").text
        token = page.split('data-csrf="', 1)[1].split('"', 1)[0]
        with pytest.raises(httpx.ReadTimeout):
            http.get("/api/sql", params={"q": FOREVER}, headers={CSRF_HEADER: token}, timeout=2)
        deadline = time.monotonic() + 60  # generous: the machine is shared
        while http.get("/api/health").json()["sql_running"] != 0:
            assert time.monotonic() < deadline, "the query kept running after its client left"
            time.sleep(0.1)
        ok = http.get("/api/sql", params={"q": "SELECT 7"}, headers={CSRF_HEADER: token})
        assert ok.json()["rows"] == [[7]]


@pytest.mark.process
def test_a_huge_result_is_read_only_up_to_the_row_limit(recorded: Recorded) -> None:
    """A trillion rows: only the first batches are ever read (a full read would hit the limit)."""
    app = create_app(recorded.log_url, recorded.archive_url, sql_limits=SqlLimits(timeout=120))
    with TestClient(app, base_url="http://127.0.0.1:8765") as http:
        answer = _with_token(http).get(
            "/api/sql", params={"q": "SELECT x FROM range(1000000000000) t(x)"}
        )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["shown"] == MAX_ROWS and body["truncated"] is True
    assert [row[0] for row in body["rows"]] == list(range(MAX_ROWS))


@pytest.mark.process
def test_a_result_within_the_limit_is_not_marked_cut(sql: TestClient) -> None:
    body = sql.get("/api/sql", params={"q": f"SELECT x FROM range({MAX_ROWS}) t(x)"}).json()
    assert body["shown"] == MAX_ROWS and body["truncated"] is False


@pytest.mark.process
def test_a_long_cell_is_cut_and_says_how_long_it_was(sql: TestClient) -> None:
    query = "SELECT repeat('a', 200000) AS s, [repeat('b', 20000)] AS l, 'short' AS t"
    answer = sql.get("/api/sql", params={"q": query})
    assert answer.status_code == 200, answer.text
    text, listed, short = answer.json()["rows"][0]
    assert text.startswith("a" * MAX_CELL) and text.endswith("(cut: 200,000 chars in all)")
    assert len(text) < MAX_CELL + 100
    assert listed.startswith('["bbb') and "(cut: 20,004 chars in all)" in listed
    assert short == "short"
    assert len(answer.content) < 3 * MAX_CELL


def test_the_served_host_names_follow_the_listening_address() -> None:
    assert set(served_hosts("127.0.0.1")) == set(LOOPBACK_HOSTS)
    assert is_loopback("127.0.0.2") and is_loopback("127.255.0.9") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
    assert "127.0.0.2" in served_hosts("127.0.0.2")
    assert "192.168.1.5" in served_hosts("192.168.1.5")
    every = served_hosts("0.0.0.0", ["myhost.lan", "10.0.0.7"])
    assert {"myhost.lan", "10.0.0.7"} <= set(every) and "0.0.0.0" not in every
    assert not any("*" in name for name in every)
    with pytest.raises(ConfigError, match="--public-host"):
        served_hosts("0.0.0.0")
    for bad in ("*.example.com", "myhost.lan:8765", ""):
        with pytest.raises(ConfigError, match="--public-host"):
            served_hosts("0.0.0.0", [bad])
    with pytest.raises(ConfigError, match="wildcard"):
        create_app("sqlite:///nowhere.db", "file:///nowhere", allowed_hosts=["*"])


@pytest.mark.process
def test_a_public_ui_answers_only_its_names_and_their_origin(recorded: Recorded) -> None:
    """Listening on every address: a rebinding page's Host, or its Origin, is refused."""
    hosts = served_hosts("0.0.0.0", ["myhost.lan"])
    token = "a-token-for-this-test-only-0d3e"
    app = create_app(
        recorded.log_url,
        recorded.archive_url,
        allow_actions=True,
        workflows=workflows,
        allowed_hosts=hosts,
        access_token=token,
    )
    with TestClient(app, base_url="http://myhost.lan:8765") as http:
        http.headers["authorization"] = f"Bearer {token}"  # tests/ui/test_access_token.py
        assert http.get("/api/runs").status_code == 200
        rebound = http.get("/api/runs", headers={"host": "evil.example:8765"})
        assert rebound.status_code == 400 and "fan-1" not in rebound.text
        _with_token(http)
        assert http.get("/api/sql", params={"q": "SELECT 1"}).status_code == 200
        for origin in (
            "http://evil.example:8765",
            "http://myhost.lan:9999",
            "https://myhost.lan:8765",
        ):
            answer = http.post("/api/runs/wait-act/cancel", json={}, headers={"origin": origin})
            assert answer.status_code == 403, origin
            assert "another site" in answer.json()["error"]
        same = http.post(
            "/api/runs/wait-act/cancel", json={}, headers={"origin": "http://myhost.lan:8765"}
        )
        assert same.status_code == 200, same.text


def test_the_cli_refuses_every_address_without_a_public_host(recorded: Recorded) -> None:
    answer = CliRunner().invoke(
        cli_app, ["ui", "--log", recorded.log_url, "--host", "0.0.0.0", "--no-browser"]
    )
    assert answer.exit_code != 0
    assert "--public-host" in answer.output
