"""A newcomer's first hour with ``agentlog ui`` (issue 21, item 12).

One count of steps everywhere, plurals, labelled task bars, a shredded run
that says so, a resume box that shows the question and the answer's shape,
and an origin that lists its forks: through the HTTP API (Starlette's
TestClient on the real app) and in headless Chromium against the real server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait
from starlette.testclient import TestClient

from agentlog.crypto import LocalKeyStore
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.replay._rows import SHREDDED
from agentlog.runtime import Runtime, RuntimeConfig
from agentlog.ui import create_app
from agentlog.ui._actions import CSRF_HEADER
from tests.support.ui import Recorded
from tests.ui.ui_workflows import fanout_workflow, review_workflow, workflows

BOUND = 60.0  # seconds; a bound for a hung page, not a speed requirement
Serve = Callable[..., str]


@pytest.fixture
def extra(recorded: Recorded, tmp_path: Path) -> dict[str, Any]:
    """Two more runs in the recorded log: ``review-1``, parked on a question
    that expects ``{"approved": bool, "note": str}``, and ``shred-1``, an
    encrypted run that completed and was then shredded."""

    async def record() -> dict[str, Any]:
        review, fan = review_workflow(), fanout_workflow()
        config = RuntimeConfig(worker=False)
        log = SqliteEventLog(str(recorded.db))
        async with Runtime(log, workflows=[review], config=config) as rt:
            await rt.start(review, run_id="review-1", input={}, durability="sync")
            await rt.wait("review-1")
        keys = LocalKeyStore(tmp_path / "keyring.json")
        async with await Runtime.open(
            recorded.log_url, workflows=[fan], config=config, keys=keys
        ) as rt:
            await rt.start(fan, run_id="shred-1", input={"topic": "secret"}, durability="sync")
            await rt.wait("shred-1")
            report = await rt.shred("shred-1")
        return {"shredded_at": report.shredded_at}

    return asyncio.run(record())


@pytest.fixture
def actions(recorded: Recorded, extra: dict[str, Any]) -> Iterator[TestClient]:
    app = create_app(
        recorded.log_url, recorded.archive_url, allow_actions=True, workflows=workflows
    )
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        yield client


def _token(client: TestClient) -> dict[str, str]:
    token = client.app.state.ui.csrf_token  # type: ignore[attr-defined]
    return {CSRF_HEADER: token}


def test_the_run_header_and_the_timeline_count_the_same_steps(actions: TestClient) -> None:
    """Regression: the header said "4 steps" (the index: StepCompleted events)
    and the timeline "3 steps" (its supersteps) for the same run."""
    for run_id in ("fan-1", "wait-act", "old-1", "review-1"):
        info = actions.get(f"/api/runs/{run_id}").json()["info"]
        counts = actions.get(f"/api/runs/{run_id}/timeline").json()["counts"]
        assert counts["steps"] == info["steps"], run_id
    fan = actions.get("/api/runs/fan-1/timeline").json()["counts"]
    assert (fan["steps"], fan["supersteps"]) == (4, 3)  # plan, left|right, finish


def test_a_shredded_run_says_when_and_that_its_payloads_are_gone(
    actions: TestClient, extra: dict[str, Any]
) -> None:
    """Regression: a shredded run read without keys showed only "encrypted: no key"."""
    shred = actions.get("/api/runs/shred-1").json()["shredded"]
    assert shred["at"] == extra["shredded_at"] and shred["seq"] is not None
    rows = actions.get("/api/runs/shred-1/events").json()["events"]
    marks = {row["unreadable"] for row in rows if "unreadable" in row}
    assert marks == {SHREDDED}
    state = actions.get("/api/runs/shred-1/state/2")
    assert state.status_code == 400
    error = state.json()["error"]
    assert "was shredded" in error and extra["shredded_at"] in error
    assert "AGENTLOG_KEYRING" not in error  # no key would ever open it again
    assert actions.get("/api/runs/fan-1").json()["shredded"] is None


def test_pending_shows_the_question_and_the_shape_its_answer_must_have(
    actions: TestClient,
) -> None:
    questions = actions.get("/api/runs/review-1/pending").json()["interrupts"]
    assert [(q["step"], q["payload"], q["expects"]) for q in questions] == [
        ("review", {"question": "ship the summary?"}, {"approved": "bool", "note": "str"})
    ]
    asked = actions.get("/api/runs/wait-act/pending").json()["interrupts"]
    assert [(q["payload"], q["expects"]) for q in asked] == [({"question": "send it?"}, None)]
    assert actions.get("/api/runs/fan-1/pending").json() == {"interrupts": []}
    answer_id = questions[0]["id"]
    wrong = actions.post(
        "/api/runs/review-1/resume",
        json={"answers": {answer_id: {"approved": None, "note": None}}},
        headers=_token(actions),
    )
    assert wrong.status_code == 400 and "must be bool" in wrong.json()["error"]
    bad = actions.post("/api/runs/review-1/resume", json={"answers": [1]}, headers=_token(actions))
    assert bad.status_code == 400 and "answers must be a JSON object" in bad.json()["error"]
    right = actions.post(
        "/api/runs/review-1/resume",
        json={"answers": {answer_id: {"approved": True, "note": "ok"}}},
        headers=_token(actions),
    )
    assert right.status_code == 200, right.text


def test_an_origin_lists_its_forks_and_only_its_own(actions: TestClient) -> None:
    assert actions.get("/api/runs/fan-1/forks").json() == {"forks": [], "complete": True}
    for origin, new, seq in (("fan-1", "fan-1-a", 4), ("fan-1-a", "fan-1-a-b", 3)):
        made = actions.post(
            f"/api/runs/{origin}/fork",
            json={"at_seq": seq, "new_run_id": new},
            headers=_token(actions),
        )
        assert made.status_code == 200, made.text
    made = actions.post(
        "/api/runs/old-1/fork", json={"at_seq": 4, "new_run_id": "old-1-a"}, headers=_token(actions)
    )
    assert made.status_code == 200, made.text

    def forks(run_id: str) -> list[tuple[str, int]]:
        answer = actions.get(f"/api/runs/{run_id}/forks").json()
        assert answer["complete"] is True
        return [(f["run_id"], f["seq"]) for f in answer["forks"]]

    assert forks("fan-1") == [("fan-1-a", 4)]  # a fork of its fork is listed there
    assert forks("fan-1-a") == [("fan-1-a-b", 3)]
    assert forks("old-1") == [("old-1-a", 4)]  # an archived origin too
    assert forks("xss-1") == [] and forks("fan-1-a-b") == []


# -- in the browser ----------------------------------------------------------


def _open(browser: WebDriver, url: str) -> None:
    browser.get(url)
    WebDriverWait(browser, BOUND).until(
        lambda d: d.find_element(By.ID, "main").get_attribute("data-ready") == "1"
    )
    _until(browser, lambda d: d.find_element(By.ID, "timeline").get_attribute("data-drawn"))


def _until(browser: WebDriver, check: Callable[[WebDriver], Any]) -> Any:
    return WebDriverWait(browser, BOUND).until(check)


def _text(browser: WebDriver, element_id: str) -> str:
    text: str = browser.find_element(By.ID, element_id).text
    return text


def test_the_page_says_one_step_count_with_plurals_and_labels_each_task(
    serve: Serve, browser: WebDriver
) -> None:
    """Regression: "7 steps" in the header, "5 steps" under the timeline,
    "1 steps", and task bars with no label."""
    url = serve()
    _open(browser, url + "runs/fan-1")
    assert "4 steps completed" in _text(browser, "run-info")
    legend = browser.find_element(By.CSS_SELECTOR, "#timeline .tl-legend").text
    assert legend.startswith("4 steps completed in 3 supersteps · 4 lanes · 3 tasks · 0 marks")
    labels = browser.find_elements(By.CSS_SELECTOR, "#timeline text.tl-bar-label")
    assert sorted(label.text for label in labels) == ["fetch", "fetch", "search"]
    bars = browser.find_elements(By.CSS_SELECTOR, "#timeline rect.tl-bar")
    assert {b.get_attribute("data-seq") for b in bars} == {
        label.get_attribute("data-seq") for label in labels
    }
    _open(browser, url + "runs/wait-act")  # draft ran; ask waits
    info = _text(browser, "run-info")
    assert "1 step completed" in info and "1 steps" not in info
    legend = browser.find_element(By.CSS_SELECTOR, "#timeline .tl-legend").text
    assert legend.startswith("1 step completed in 2 supersteps · 2 lanes · 0 tasks · 1 mark")


def test_the_resume_box_shows_the_question_and_starts_from_the_expected_shape(
    serve: Serve, browser: WebDriver, extra: dict[str, Any]
) -> None:
    """Regression: the box showed neither the question nor the answer's shape,
    and held ``true`` ready to send."""
    url = serve("--allow-actions", "--app", "tests.ui.ui_workflows:workflows")
    _open(browser, url + "runs/wait-act")
    box = _until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#pending .question"))[0]
    assert "send it?" in box.text and "the answer must be: any JSON value" in box.text
    assert browser.find_element(By.ID, "resume-value").get_attribute("value") == ""

    _open(browser, url + "runs/review-1")
    box = _until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#pending .question"))[0]
    assert "ship the summary?" in box.text
    assert 'the answer must be: {"approved":"bool","note":"str"}' in box.text
    answer = browser.find_element(By.ID, "resume-value")
    assert answer.get_attribute("value") == '{"approved":null,"note":null}'
    browser.find_element(By.ID, "resume").click()  # the template as it stands: refused
    _until(browser, lambda d: "must be bool" in _text(d, "resume-note"))
    assert "waiting" in _text(browser, "run-info")
    answer.clear()
    answer.send_keys('{"approved": true, "note": "ship it"}')
    browser.find_element(By.ID, "resume").click()
    _until(browser, lambda d: "completed" in _text(d, "run-info"))
    _until(browser, lambda d: not d.find_element(By.ID, "pending").is_displayed())


def test_a_shredded_run_page_says_so(
    serve: Serve, browser: WebDriver, extra: dict[str, Any]
) -> None:
    _open(browser, serve() + "runs/shred-1")
    notice = _until(browser, lambda d: d.find_element(By.ID, "shredded").is_displayed() and d)
    text = _text(notice, "shredded")
    assert text.startswith("Shredded on ") and "gone for good" in text
    payloads = browser.find_elements(By.CSS_SELECTOR, "#events td.payload")
    assert any(SHREDDED in p.text for p in payloads)
    assert not any("no key" in p.text for p in payloads)


def test_an_origin_page_links_to_its_forks(serve: Serve, browser: WebDriver) -> None:
    url = serve("--allow-actions", "--app", "tests.ui.ui_workflows:workflows")
    _open(browser, url + "runs/fan-1")
    browser.find_element(By.CSS_SELECTOR, "tr.event[data-seq='4'] td.seq").click()
    browser.find_element(By.ID, "fork-id").send_keys("fan-1-ui")
    browser.find_element(By.ID, "fork").click()
    _until(browser, lambda d: d.find_elements(By.ID, "origin-link"))
    _open(browser, url + "runs/fan-1")
    link = _until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#forks a.fork-link"))[0]
    assert link.text == "fan-1-ui"
    assert _text(browser, "forks").startswith("forked into 1 run: fan-1-ui at seq 4")
    link.click()
    _until(browser, lambda d: d.current_url == url + "runs/fan-1-ui")
