"""``agentlog ui``: the run page of a 100,000-event run and the runs page over
100,000 runs, in Debian's headless Chromium against the real server.

* Run page (one run of 100,000 events): in the browser, first contentful
  paint and interactive (the page's ``agentlog-ready`` mark, set after its
  first data render: run info, the first 200 events and the timeline), for
  the first load (the server builds the timeline's latest window from the
  events of its steps, then keeps it) and for loads after it; on the server,
  each request the page makes.
  Target: < 1 s.
* Runs page (70,000 hot runs in SQLite and 30,000 archived in Parquet): the
  server time of ``/api/runs`` for the first page, a filtered page, a run id
  search and a deep page, and the page load in the browser. Target: < 500 ms
  per page.

The data is built as :mod:`benchmarks.bench_catalog` builds it (batches
straight into the SQLite schema and the archive writer). Figures are
reported, never asserted.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from agentlog.archive import LocalArchiveStore
from agentlog.eventlog.sqlite import SqliteEventLog
from benchmarks.bench_catalog import build_long_run, build_runs
from benchmarks.harness import Row, row_from_samples

AREA = "ui"
ROOT = Path(__file__).resolve().parents[1]
BOUND = 300.0  # seconds: only stops a hung page


def _serve(db: Path, archive: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    command = [sys.executable, "-m", "agentlog", "ui", "--log", f"sqlite:///{db}"]
    command += ["--archive", f"file://{archive}", "--port", "0", "--no-browser"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().split("agentlog ui: ", 1)[-1].split()[0]
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=5).raise_for_status()
            return proc, url
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("agentlog ui did not answer")


def _browser() -> WebDriver:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


_MARKS = """
const at = (name) => {
  const entry = performance.getEntriesByName(name)[0];
  return entry ? entry.startTime : 0;
};
return [at('first-contentful-paint'), at('agentlog-ready'), at('agentlog-timeline')];
"""


def _load(driver: WebDriver, url: str) -> tuple[float, float, float]:
    """Open ``url`` fresh; return (first contentful paint, ready, timeline drawn)
    in seconds (the last is 0 on a page without a timeline)."""
    driver.get("about:blank")
    driver.get(url)
    WebDriverWait(driver, BOUND).until(
        lambda d: d.find_element(By.ID, "main").get_attribute("data-ready") == "1"
    )
    if "/runs/" in url:
        WebDriverWait(driver, BOUND).until(
            lambda d: d.find_element(By.ID, "timeline").get_attribute("data-drawn")
        )
    paint, ready, drawn = driver.execute_script(_MARKS)
    return paint / 1e3, ready / 1e3, drawn / 1e3


def _server_times(url: str, repeat: int, **params: Any) -> list[float]:
    samples = []
    with httpx.Client(timeout=BOUND) as client:
        client.get(url, params=params).raise_for_status()  # warm up
        for _ in range(repeat):
            started = time.perf_counter()
            client.get(url, params=params).raise_for_status()
            samples.append(time.perf_counter() - started)
    return samples


def _run_page(driver: WebDriver, url: str, events: int, repeat: int) -> list[Row]:
    page = url + "runs/long"
    # A freshly started Chromium spends most of a second on its very first
    # paint, whatever the page: open another page first, so that the first
    # load below measures the run page cold on the server, not the browser.
    browser_paint, browser_ready, _ = _load(driver, url)
    cold_paint, cold_ready, cold_drawn = _load(driver, page)
    loads = [_load(driver, page) for _ in range(repeat)]
    rows = [
        Row(
            AREA,
            f"run page, first load: interactive ({events:,} events)",
            "ms",
            cold_ready * 1e3,
            extra={
                "first_paint_ms": round(cold_paint * 1e3, 1),
                "timeline_drawn_ms": round(cold_drawn * 1e3, 1),
                "target_ms": 1000,
            },
        ),
        Row(
            AREA,
            "browser's first page ever (the runs page): first contentful paint",
            "ms",
            browser_paint * 1e3,
            extra={"ready_ms": round(browser_ready * 1e3, 1)},
        ),
    ]
    for i, what in enumerate(("first contentful paint", "interactive", "timeline drawn")):
        rows.append(
            row_from_samples(
                AREA, f"run page: {what} ({events:,} events)", [s[i] for s in loads], target_ms=1000
            )
        )
    api = url + "api/runs/long"
    for name, path, params in (
        ("run page HTML", page, {}),
        ("run info", api, {}),
        ("first 200 events", api + "/events", {"after": 0, "limit": 200}),
        ("200 events deep in the run", api + "/events", {"after": events - 1000, "limit": 200}),
        ("timeline (latest steps)", api + "/timeline", {}),
        ("state at the last seq", f"{api}/state/{events}", {}),
    ):
        samples = _server_times(path, repeat, **params)
        rows.append(row_from_samples(AREA, f"server: {name}", samples, target_ms=1000))
    return rows


def _runs_page(driver: WebDriver, url: str, total: int, repeat: int) -> list[Row]:
    rows = []
    deep = total - total // 10
    for name, params in (
        ("first page", {}),
        ("filtered (status+workflow)", {"status": "failed", "workflow": "support"}),
        ("run id search", {"text": "1234"}),
        (f"deep page (offset {deep:,})", {"offset": deep}),
    ):
        samples = _server_times(url + "api/runs", repeat, limit=50, **params)
        rows.append(
            row_from_samples(AREA, f"server: /api/runs {name}", samples, runs=total, target_ms=500)
        )
    loads = [_load(driver, url) for _ in range(repeat)]
    rows.append(
        row_from_samples(
            AREA,
            "runs page in the browser: interactive",
            [r for _, r, _ in loads],
            runs=total,
            first_paint_ms=round(sorted(p for p, _, _ in loads)[len(loads) // 2] * 1e3, 1),
            target_ms=500,
        )
    )
    return rows


def collect(quick: bool) -> list[Row]:
    hot, archived, events = (7_000, 3_000, 10_000) if quick else (70_000, 30_000, 100_000)
    repeat = 3 if quick else 10
    with tempfile.TemporaryDirectory(prefix="agentlog-bench-ui-") as tmp:
        root = Path(tmp)
        db, archive = root / "hot.db", root / "archive"
        build_runs(db, LocalArchiveStore(archive), hot, archived)

        async def long_run() -> None:
            async with SqliteEventLog(db) as log:
                await build_long_run(log, events)

        asyncio.run(long_run())
        proc, url = _serve(db, archive)
        driver = _browser()
        try:
            rows = _run_page(driver, url, events, repeat)
            rows += _runs_page(driver, url, hot + archived + 1, repeat)
        finally:
            driver.quit()
            proc.terminate()
            proc.wait(timeout=30)
    return rows
