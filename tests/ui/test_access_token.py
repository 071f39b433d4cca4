"""A UI that a network can reach demands its access token of every request.

Before, ``--host 0.0.0.0 --public-host NAME --allow-actions`` let any host
that reached the port read ``data-csrf`` off ``/`` and cancel runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait
from starlette.testclient import TestClient

from agentlog.errors import ConfigError
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.ui import create_app
from agentlog.ui._access import check_token
from agentlog.ui._actions import CSRF_HEADER
from agentlog.ui._app import served_hosts
from tests.support.ui import Recorded
from tests.ui.ui_workflows import workflows

Serve = Callable[..., str]
TOKEN = "s3cret-token-for-the-ui-tests-9f2"
BOUND = 60.0  # seconds; a bound for a hung page, not a speed requirement

#: Everything a network peer could ask for: pages, the API, a live feed, static files.
PATHS = (
    "/",
    "/runs/fan-1",
    "/sql",
    "/api/runs",
    "/api/health",
    "/api/runs/fan-1/events",
    "/api/runs/wait-live/live",
    "/static/common.js",
)


def status_of(recorded: Recorded, run_id: str) -> str:
    async def read() -> str:
        async with SqliteEventLog(str(recorded.db)) as log:
            return str((await log.get_run(run_id)).status)

    return asyncio.run(read())


def csrf_of(page: str) -> str:
    return page.split('data-csrf="', 1)[1].split('"', 1)[0]


@pytest.fixture
def public(recorded: Recorded) -> Iterator[TestClient]:
    """A UI on every address with actions and the access token; no credentials sent."""
    app = create_app(
        recorded.log_url,
        recorded.archive_url,
        allow_actions=True,
        workflows=workflows,
        allowed_hosts=served_hosts("0.0.0.0", ["myhost.lan"]),
        access_token=TOKEN,
    )
    with TestClient(app, base_url="http://myhost.lan:8765", follow_redirects=False) as http:
        yield http


def test_without_the_token_nothing_is_served_and_nothing_is_done(
    public: TestClient, recorded: Recorded
) -> None:
    csrf = public.app.state.ui.csrf_token  # type: ignore[attr-defined]
    for host in ("myhost.lan:8765", "127.0.0.1:8765"):  # a peer may name any served host
        for path in PATHS:
            answer = public.get(path, headers={"host": host})
            assert answer.status_code == 401, (host, path, answer.status_code)
            assert answer.headers["www-authenticate"].startswith("Bearer")
            assert "fan-1" not in answer.text and csrf not in answer.text, path
            assert "data-csrf" not in answer.text and "?token=" in answer.text, path
    # Even a peer that somehow had the CSRF token cannot act.
    cancel = public.post("/api/runs/wait-act/cancel", json={}, headers={CSRF_HEADER: csrf})
    assert cancel.status_code == 401
    for wrong in ({"authorization": "Bearer guess-guess-guess-guess"}, {"cookie": "x=1"}):
        refused = public.get("/api/runs", headers=wrong)
        assert refused.status_code in (401, 403) and "fan-1" not in refused.text
    assert public.get("/?token=guess-guess-guess-guess").status_code == 403
    assert status_of(recorded, "wait-act") == "waiting"


def test_the_token_url_sets_a_strict_cookie_and_redirects_to_the_clean_url(
    public: TestClient, recorded: Recorded
) -> None:
    entered = public.get(f"/runs/fan-1?x=1&token={TOKEN}")
    assert entered.status_code == 303
    assert entered.headers["location"] == "/runs/fan-1?x=1"
    cookie = entered.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    assert "Path=/" in cookie and TOKEN not in cookie
    page = public.get("/")  # the client keeps the cookie, as a browser does
    assert page.status_code == 200 and 'data-actions="1"' in page.text
    assert public.get("/api/runs").json()["total"] >= 4
    acted = public.post(
        "/api/runs/wait-act/cancel", json={}, headers={CSRF_HEADER: csrf_of(page.text)}
    )
    assert acted.status_code == 200, acted.text
    assert status_of(recorded, "wait-act") == "cancelled"


def test_a_script_sends_the_token_as_a_bearer_header(public: TestClient) -> None:
    answer = public.get("/api/runs", headers={"authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 200 and answer.json()["total"] >= 4
    assert "set-cookie" not in answer.headers


def test_a_public_ui_cannot_be_made_without_a_token(recorded: Recorded) -> None:
    hosts = served_hosts("0.0.0.0", ["myhost.lan"])
    with pytest.raises(ConfigError, match="access token"):
        create_app(recorded.log_url, recorded.archive_url, allowed_hosts=hosts)
    for bad in ("short", "has a space in it ok", "tab\tinside-the-token-x"):
        with pytest.raises(ConfigError, match="--token"):
            check_token(bad)
    # This machine only: no token, as before.
    app = create_app(recorded.log_url, recorded.archive_url)
    with TestClient(app, base_url="http://127.0.0.1:8765") as http:
        assert http.get("/api/runs").status_code == 200


def test_agentlog_ui_on_every_address_prints_a_token_url_and_demands_it(serve: Serve) -> None:
    printed = serve(
        "--host", "0.0.0.0", "--public-host", "myhost.test",
        "--allow-actions", "--app", "tests.ui.ui_workflows:workflows",
    )  # fmt: skip
    parts = urlsplit(printed)
    # myhost.test does not resolve here; the loopback names are served too.
    base = f"http://127.0.0.1:{parts.port}"
    with httpx.Client(base_url=base, timeout=60) as peer:
        for path in PATHS:
            assert peer.get(path).status_code == 401, path
        page = peer.get("/")
        assert "data-csrf" not in page.text
        token = parse_qs(parts.query)["token"][0]
        assert len(token) >= 40 and parts.hostname == "myhost.test"
        bearer = peer.get("/api/runs", headers={"authorization": f"Bearer {token}"})
        assert bearer.status_code == 200
    with httpx.Client(timeout=60, follow_redirects=True) as browser:
        page = browser.get(f"{base}/?{parts.query}")
        assert page.status_code == 200 and str(page.url) == base + "/"
        assert browser.get(base + "/api/health").json()["ok"] is True


def test_a_browser_opens_the_token_url_and_the_pages_work(serve: Serve, browser: WebDriver) -> None:
    """The cookie carries the pages' own requests: the runs' data and a run's events."""
    printed = urlsplit(serve("--host", "0.0.0.0", "--public-host", "myhost.test"))
    base = f"http://127.0.0.1:{printed.port}"
    browser.get(f"{base}/runs/fan-1?{printed.query}")
    wait = WebDriverWait(browser, BOUND)
    wait.until(lambda d: d.find_element(By.ID, "main").get_attribute("data-ready") == "1")
    assert browser.current_url == f"{base}/runs/fan-1"  # the token left the address bar
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "tr.event")) > 0)
    browser.get(f"{base}/")
    wait.until(lambda d: d.find_element(By.ID, "main").get_attribute("data-ready") == "1")
    links = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "a.run-link")]
    assert "fan-1" in links
