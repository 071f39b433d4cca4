"""Screenshots of the web debugger's pages, for docs/ui.md.

Records real runs of the demo workflow (``agentlog.demo``: plan, three
searches in parallel, one retried, a draft, an approval, an email) in a
fresh SQLite log with a local keyring, serves them with the real
``agentlog ui --allow-actions``, and saves what headless Debian Chromium
(through Debian's chromedriver, as ``tests/ui`` and ``benchmarks/bench_ui``
drive it) shows:

* ``ui-run-page.png``: a completed run: the timeline with its labelled task
  bars, the events, and the state at a chosen seq;
* ``ui-resume-box.png``: a run waiting on the approval, with the question and
  an answer box that starts from the shape the interrupt expects;
* ``ui-shredded-run.png``: a run whose data key was destroyed;
* ``ui-forks.png``: a run and the runs forked from it.

Run it again after changing a page::

    PYTHONPATH=src python scripts/screenshots.py            # into docs/img/
    PYTHONPATH=src python scripts/screenshots.py --out DIR
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from agentlog.crypto import LocalKeyStore
from agentlog.demo import demo_workflow
from agentlog.runtime import Runtime, RuntimeConfig

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
BOUND = 120.0  # seconds: only stops a hung page
WIDTH = 1400

TOPIC = "durable execution for AI agents"
WAITING, DONE, FORK, SHREDDED = "research-waiting", "research-1", "research-1-redo", "research-old"


async def _record(log_url: str, keys: LocalKeyStore, outbox: Path) -> None:
    """The runs the pages show (every one of the demo workflow)."""
    wf = demo_workflow()
    config = RuntimeConfig(worker=False)
    async with await Runtime.open(log_url, workflows=[wf], config=config, keys=keys) as rt:
        given = {"topic": TOPIC, "outbox": str(outbox)}
        for run_id in (WAITING, DONE, SHREDDED):
            await rt.start(wf, run_id=run_id, input=given, durability="sync")
            await rt.wait(run_id)
        for run_id in (DONE, SHREDDED):
            await rt.resume(run_id, {"approved": True})
            await rt.wait(run_id)
        # Fork the completed run where its draft was written, with another draft.
        events = [e async for e in rt.log.read(DONE)]
        at = next(e.seq for e in events if e.type == "StepCompleted" and e.data.step == "draft")
        await rt.fork(DONE, at, new_run_id=FORK, updates={"draft": "[model] a shorter summary"})
        await rt.wait(FORK)
        await rt.shred(SHREDDED)


def _serve(log_url: str, keyring: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "AGENTLOG_KEYRING": str(keyring)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "agentlog", "ui", "--log", log_url, "--port", "0"]
    command += ["--no-browser", "--allow-actions"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "http://" not in line:
        proc.kill()
        raise SystemExit(f"agentlog ui did not start: {line!r}")
    return proc, line.split("agentlog ui: ", 1)[1].split()[0]


def _browser() -> WebDriver:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument(f"--window-size={WIDTH},1000")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(BOUND)
    return driver


def _until(browser: WebDriver, check: Callable[[WebDriver], Any]) -> Any:
    return WebDriverWait(browser, BOUND).until(check)


def _open(browser: WebDriver, url: str) -> None:
    browser.set_window_size(WIDTH, 1000)
    browser.get(url)
    _until(browser, lambda d: d.find_element(By.ID, "main").get_attribute("data-ready") == "1")
    _until(browser, lambda d: d.find_element(By.ID, "timeline").get_attribute("data-drawn"))


def _shoot(browser: WebDriver, path: Path, height: int | None = None) -> None:
    """Save the page (its whole height, or ``height`` pixels of it)."""
    full = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(WIDTH, min(int(height or full) + 140, 2400))
    browser.execute_script("window.scrollTo(0, 0)")
    time.sleep(0.5)  # a resized window redraws the timeline; nothing is asserted on it
    browser.save_screenshot(str(path))
    print(f"wrote {path}")


def _shots(browser: WebDriver, url: str, out: Path) -> None:
    _open(browser, f"{url}runs/{DONE}")
    for row in browser.find_elements(By.CSS_SELECTOR, "tr.event"):
        if row.find_element(By.CSS_SELECTOR, ".type").text == "SuperstepCommitted":
            seq = row.get_attribute("data-seq")
            row.find_element(By.CSS_SELECTOR, "td.seq").click()
            shown = f"#state[data-seq='{seq}']"
            _until(browser, lambda d, at=shown: d.find_elements(By.CSS_SELECTOR, at))
            break
    _shoot(browser, out / "ui-run-page.png", 1000)

    _open(browser, f"{url}runs/{WAITING}")
    _until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#pending .question"))
    _shoot(browser, out / "ui-resume-box.png", 900)

    _open(browser, f"{url}runs/{SHREDDED}")
    _until(browser, lambda d: d.find_element(By.ID, "shredded").is_displayed())
    _shoot(browser, out / "ui-shredded-run.png", 900)

    _open(browser, f"{url}runs/{DONE}")
    _until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#forks a.fork-link"))
    _shoot(browser, out / "ui-forks.png", 560)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img", help="where the PNGs go")
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="agentlog-shots-") as tmp:
        folder = Path(tmp)
        log_url, keyring = f"sqlite:///{folder / 'agentlog.db'}", folder / "keyring.json"
        asyncio.run(_record(log_url, LocalKeyStore(keyring), folder / "outbox.db"))
        proc, url = _serve(log_url, keyring)
        browser = _browser()
        try:
            _shots(browser, url, out)
        finally:
            browser.quit()
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
