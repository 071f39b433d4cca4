"""The UI's HTTP surface under hostile or awkward input: numbers, run ids,
SQL results, server errors, the token on SQL, and which Host names it serves.

Starlette's TestClient runs the real app (lifespan included) in-process.
"""

from __future__ import annotations

import asyncio
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

from agentlog.eventlog import Event, RunCompleted, RunStarted, StepCompleted, SuperstepCommitted
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.ui import create_app
from agentlog.ui.app import SECURITY_HEADERS
from agentlog.ui.params import decode_run_id, encode_run_id
from tests.ui.conftest import Recorded

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
