"""``agentlog ui`` in a real browser: headless Chromium against the running server.

Every wait is on a condition of the page (generous bounds that only stop a
hung test); the screenshots land in the artifacts folder.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime, RuntimeConfig
from tests.support.ui import Recorded
from tests.ui.ui_workflows import HOSTILE, approval_workflow

BOUND = 60.0  # seconds; a bound for a hung page, not a speed requirement

Serve = Callable[..., str]


def _open(browser: WebDriver, url: str) -> None:
    """Load ``url`` and wait until the page marks its first data render (and a
    run page has drawn its timeline)."""
    browser.get(url)
    WebDriverWait(browser, BOUND).until(
        lambda d: d.find_element(By.ID, "main").get_attribute("data-ready") == "1"
    )
    if "/runs/" in url:
        _until(browser, lambda d: d.find_element(By.ID, "timeline").get_attribute("data-drawn"))


def _until(browser: WebDriver, check: Callable[[WebDriver], Any]) -> Any:
    return WebDriverWait(browser, BOUND).until(check)


def _rows(browser: WebDriver) -> list[int]:
    return [
        int(r.get_attribute("data-seq")) for r in browser.find_elements(By.CSS_SELECTOR, "tr.event")
    ]


def _type(row: Any) -> str:
    text: str = row.find_element(By.CSS_SELECTOR, ".type").text
    return text


def test_runs_page_lists_hot_and_archived_runs(
    serve: Serve, browser: WebDriver, artifacts: Path
) -> None:
    _open(browser, serve())
    links = {a.text for a in browser.find_elements(By.CSS_SELECTOR, "a.run-link")}
    assert links == {"fan-1", "xss-1", "old-1", "wait-live", "wait-act"}
    counts = browser.find_element(By.ID, "counts").text
    assert counts.startswith("5 runs") and "waiting 2" in counts
    browser.save_screenshot(str(artifacts / "ui-runs.png"))
    browser.find_element(By.ID, "f-text").send_keys("wait")
    browser.find_element(By.CSS_SELECTOR, "#filters button").click()
    _until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "a.run-link")) == 2)


def test_timeline_shows_each_step_and_its_branches(
    serve: Serve, browser: WebDriver, artifacts: Path
) -> None:
    _open(browser, serve() + "runs/fan-1")
    steps = browser.find_elements(By.CSS_SELECTOR, "#timeline g.tl-step")
    lanes = [
        [
            lane.get_attribute("data-step")
            for lane in step.find_elements(By.CSS_SELECTOR, "g.tl-lane")
        ]
        for step in steps
    ]
    assert lanes == [["plan"], ["left", "right"], ["finish"]]
    assert len(browser.find_elements(By.CSS_SELECTOR, "#timeline rect.tl-bar")) == 3  # the tasks
    browser.save_screenshot(str(artifacts / "ui-run.png"))


def test_clicking_an_event_shows_the_state_at_its_seq(
    serve: Serve, browser: WebDriver, artifacts: Path
) -> None:
    url = serve()
    _open(browser, url + "runs/fan-1")
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.event")
    step_row = next(
        r for r in rows if r.find_element(By.CSS_SELECTOR, ".type").text == "StepCompleted"
    )
    seq = int(step_row.get_attribute("data-seq"))
    step_row.find_element(By.CSS_SELECTOR, "td.seq").click()
    state = _until(browser, lambda d: d.find_element(By.CSS_SELECTOR, f"#state[data-seq='{seq}']"))
    expected = httpx.get(f"{url}api/runs/fan-1/state/{seq}").json()
    assert json.loads(state.text) == expected["state"]
    assert browser.find_element(By.ID, "inspect-title").text == f"State at seq {seq}"
    changes = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#diff td")]
    assert changes and "notes" in " ".join(changes)  # the step's writes, as the diff
    browser.save_screenshot(str(artifacts / "ui-run-state.png"))


def test_an_open_run_page_updates_as_events_are_recorded(
    serve: Serve, browser: WebDriver, recorded: Recorded
) -> None:
    _open(browser, serve() + "runs/wait-live")
    before = max(_rows(browser))
    _until(browser, lambda d: "live" in d.find_element(By.ID, "live").text)

    async def answer() -> int:  # another process (the test) records new events
        wf = approval_workflow()
        log = SqliteEventLog(str(recorded.db))
        async with Runtime(log, workflows=[wf], config=RuntimeConfig(worker=False)) as rt:
            await rt.resume("wait-live", "yes")
            return (await rt.wait("wait-live")).seq

    last = asyncio.run(answer())
    assert last > before
    _until(browser, lambda d: max(_rows(d)) == last)
    _until(browser, lambda d: "completed" in d.find_element(By.ID, "run-info").text)


def test_an_archived_run_opens(serve: Serve, browser: WebDriver) -> None:
    _open(browser, serve() + "runs/old-1")
    assert "archive" in browser.find_element(By.ID, "run-info").text
    assert _rows(browser)[0] == 1
    browser.find_elements(By.CSS_SELECTOR, "tr.event td.seq")[-1].click()
    _until(browser, lambda d: d.find_element(By.ID, "state").text.strip().startswith("{"))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#timeline g.tl-step")) == 3


def test_a_hostile_payload_is_shown_as_text_and_runs_nothing(
    serve: Serve, browser: WebDriver
) -> None:
    _open(browser, serve() + "runs/xss-1")
    browser.find_element(By.CSS_SELECTOR, "tr.event[data-seq='1'] td.seq").click()
    as_json = json.dumps(HOSTILE)[1:-1]  # the text as the page prints it in JSON
    _until(browser, lambda d: as_json in d.find_element(By.ID, "state").text)
    for fold in browser.find_elements(By.CSS_SELECTOR, "details.fold summary"):
        fold.click()  # open every folded payload: still text
    assert as_json in browser.find_element(By.ID, "events").text
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    assert browser.find_elements(By.CSS_SELECTOR, "main img, main script") == []


def test_the_sql_page_shows_a_table_and_a_chart(serve: Serve, browser: WebDriver) -> None:
    _open(browser, serve() + "sql")
    headers = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#sql-result th")]
    assert headers == ["status", "runs"]
    cells = {
        r.find_elements(By.TAG_NAME, "td")[0].text: r.find_elements(By.TAG_NAME, "td")[1].text
        for r in browser.find_elements(By.CSS_SELECTOR, "#sql-result tbody tr")
    }
    assert cells == {"completed": "3", "waiting": "2"}
    assert len(browser.find_elements(By.CSS_SELECTOR, "#chart rect.bar")) == 2
    query = browser.find_element(By.ID, "sql-query")
    query.clear()
    query.send_keys("DROP VIEW runs")
    browser.find_element(By.CSS_SELECTOR, "#sql-form button").click()
    _until(browser, lambda d: "not allowed" in d.find_element(By.ID, "sql-error").text)


def test_an_unknown_run_is_a_404_page(serve: Serve, browser: WebDriver) -> None:
    browser.get(serve() + "runs/no-such-run")
    assert "unknown run 'no-such-run'" in browser.find_element(By.ID, "error-message").text


def test_with_actions_the_page_resumes_a_waiting_run(serve: Serve, browser: WebDriver) -> None:
    _open(
        browser,
        serve("--allow-actions", "--app", "tests.ui.ui_workflows:workflows") + "runs/wait-act",
    )
    answer = _until(browser, lambda d: d.find_elements(By.ID, "resume-value"))[0]
    answer.send_keys('"yes"')  # the box starts empty: no answer is ready to send by accident
    browser.find_element(By.ID, "resume").click()
    _until(browser, lambda d: "completed" in d.find_element(By.ID, "run-info").text)


def test_with_actions_the_page_forks_a_run_and_links_the_two(
    serve: Serve, browser: WebDriver
) -> None:
    url = serve("--allow-actions", "--app", "tests.ui.ui_workflows:workflows")
    _open(browser, url + "runs/fan-1")
    browser.find_element(By.CSS_SELECTOR, "tr.event[data-seq='4'] td.seq").click()
    browser.find_element(By.ID, "fork-id").send_keys("fan-1-ui")
    browser.find_element(By.ID, "fork").click()
    link = _until(browser, lambda d: d.find_elements(By.ID, "origin-link"))[0]
    assert browser.current_url == url + "runs/fan-1-ui"
    assert link.text == "fan-1"
    assert browser.find_element(By.ID, "origin").text == "forked from fan-1 at seq 4"


def test_leaving_a_live_page_closes_its_feed(serve: Serve, browser: WebDriver) -> None:
    """Regression: a left page kept its live feed open, and a browser holds six
    connections per server, so the seventh page of a running run hung."""
    url = serve()

    def open_feeds() -> int:
        feeds: int = httpx.get(url + "api/health").json()["live_feeds"]
        return feeds

    for _ in range(8):
        _open(browser, url + "runs/wait-live")
        _until(browser, lambda d: open_feeds() == 1)
        browser.get("about:blank")
        _until(browser, lambda d: open_feeds() == 0)
