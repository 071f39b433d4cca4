"""Fixtures of the UI tests: a recorded log, the real ``agentlog ui`` server, a browser.

The server is the real command, started as a subprocess on a free port of
127.0.0.1 (``--port 0``: it prints the URL it took); the browser is Debian's
Chromium driven by Selenium through Debian's chromedriver, headless.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support.ui import Recorded, record

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: Generous bounds: the machine is shared; these only stop a hung test.
START_SECONDS = 60.0


@pytest.fixture
def recorded(tmp_path: Path) -> Recorded:
    """A SQLite log with: ``fan-1`` (completed: plan, left|right, finish),
    ``xss-1`` (the same with a hostile topic), ``wait-live`` and ``wait-act``
    (parked on a question) and ``old-1`` (completed, archived, pruned)."""
    db = tmp_path / "log.db"
    archive_url = f"file://{tmp_path / 'archive'}"
    asyncio.run(record(db, archive_url))
    return Recorded(f"sqlite:///{db}", archive_url, db)


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: $AGENTLOG_TEST_ARTIFACTS, or a temporary folder."""
    chosen = os.environ.get("AGENTLOG_TEST_ARTIFACTS")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("ui-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _wait_for_url(proc: subprocess.Popen[str]) -> str:
    """The URL the server printed (its first line), then wait until it answers
    (a URL with an access token answers with a redirect to the page)."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "http://" not in line:
        proc.kill()
        raise AssertionError(f"agentlog ui did not start: {line!r} {proc.communicate()}")
    url = line.split("agentlog ui: ", 1)[1].split()[0]
    # A --public-host name need not resolve here; the loopback names are always served.
    parts = urlsplit(url)
    named = parts.hostname in ("127.0.0.1", "localhost", "::1")
    probe = url if named else parts._replace(netloc=f"127.0.0.1:{parts.port}").geturl()
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            httpx.get(probe, timeout=5, follow_redirects=True).raise_for_status()
            return url
        except httpx.HTTPError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"agentlog ui never answered: {proc.communicate()}") from None
            time.sleep(0.05)


@pytest.fixture
def serve(recorded: Recorded) -> Iterator[Callable[..., str]]:
    """Start ``agentlog ui`` on the recorded log (extra CLI options allowed); return its URL."""
    procs: list[subprocess.Popen[str]] = []
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    env.pop("AGENTLOG_KEYRING", None)

    def start(*extra: str) -> str:
        command = [sys.executable, "-m", "agentlog", "ui", "--log", recorded.log_url]
        command += ["--archive", recorded.archive_url, "--port", "0", "--no-browser", *extra]
        proc = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        procs.append(proc)
        return _wait_for_url(proc)

    yield start
    for proc in procs:
        proc.terminate()
        try:
            proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


@pytest.fixture(scope="session")
def browser() -> Iterator[WebDriver]:
    """Headless Chromium (Debian's), driven through Debian's chromedriver."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(flag)
    options.add_argument("--disable-dev-shm-usage")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(START_SECONDS)
    try:
        yield driver
    finally:
        driver.quit()
