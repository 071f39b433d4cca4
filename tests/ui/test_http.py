"""The UI's HTTP surface without a browser: errors, headers, and the write guard.

Starlette's TestClient runs the real app (lifespan included) in-process.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.ui import create_app
from agentlog.ui._actions import CSRF_HEADER
from tests.support.ui import Recorded
from tests.ui.ui_workflows import workflows

WRITES = (
    ("/api/runs/wait-act/resume", {"value": True}),
    ("/api/runs/wait-act/cancel", {}),
    ("/api/runs/fan-1/fork", {"at_seq": 3, "new_run_id": "fan-1-fork"}),
)


def _client(recorded: Recorded, *, allow_actions: bool) -> TestClient:
    app = create_app(
        recorded.log_url, recorded.archive_url, allow_actions=allow_actions, workflows=workflows
    )
    return TestClient(app, base_url="http://127.0.0.1:8765")


@pytest.fixture
def client(recorded: Recorded) -> Iterator[TestClient]:
    with _client(recorded, allow_actions=False) as open_client:
        yield open_client


@pytest.fixture
def actions(recorded: Recorded) -> Iterator[TestClient]:
    with _client(recorded, allow_actions=True) as open_client:
        yield open_client


def _statuses(recorded: Recorded) -> dict[str, tuple[str, int]]:
    async def read() -> dict[str, tuple[str, int]]:
        async with SqliteEventLog(str(recorded.db)) as log:
            return {i.run_id: (i.status, i.last_seq) for i in await log.list_runs()}

    return asyncio.run(read())


@pytest.mark.process
def test_every_response_carries_the_security_headers(client: TestClient) -> None:
    for path in ("/", "/runs/fan-1", "/sql", "/api/runs", "/static/run.js", "/runs/nope"):
        headers = client.get(path).headers
        policy = headers["content-security-policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy, path
        assert headers["x-content-type-options"] == "nosniff", path


def test_a_host_name_other_than_this_machine_is_refused(client: TestClient) -> None:
    """A page whose DNS name was re-pointed at 127.0.0.1 (rebinding) reads nothing."""
    refused = client.get("/api/runs", headers={"host": "evil.example:8765"})
    assert refused.status_code == 400 and "fan-1" not in refused.text
    assert client.get("/api/runs", headers={"host": "localhost:8765"}).status_code == 200


def test_unknown_run_is_a_404_page_and_a_404_json(client: TestClient) -> None:
    page = client.get("/runs/no-such-run")
    assert page.status_code == 404
    assert "text/html" in page.headers["content-type"]
    assert "unknown run &#x27;no-such-run&#x27;" in page.text and "Traceback" not in page.text
    api = client.get("/api/runs/no-such-run/events")
    assert api.status_code == 404 and "unknown run" in api.json()["error"]


def test_seq_out_of_range_is_a_clear_400(client: TestClient) -> None:
    last = client.get("/api/runs/fan-1").json()["last_seq"]
    for seq in (0, last + 1):
        answer = client.get(f"/api/runs/fan-1/state/{seq}")
        assert answer.status_code == 400, seq
        assert f"its events are seq 1 to {last}" in answer.json()["error"]
    answer = client.get("/api/runs/fan-1/state/x")
    assert answer.status_code == 400 and "not a whole number" in answer.json()["error"]
    assert client.get(f"/api/runs/fan-1/state/{last}").status_code == 200


@pytest.mark.process
def test_sql_that_writes_or_reads_files_is_refused(client: TestClient, recorded: Recorded) -> None:
    before = _statuses(recorded)
    client.headers[CSRF_HEADER] = _token(client)
    for query in (
        "DELETE FROM events",
        "CREATE TABLE t AS SELECT 1",
        f"SELECT * FROM read_csv('{recorded.db}')",
        "COPY (SELECT 1) TO '/tmp/agentlog-ui-escape.csv'",
    ):
        answer = client.get("/api/sql", params={"q": query})
        assert answer.status_code == 400, query
        assert answer.json()["error"], query
    assert _statuses(recorded) == before
    ok = client.get("/api/sql", params={"q": "SELECT run_id, steps FROM runs ORDER BY run_id"})
    assert ok.status_code == 200
    body = ok.json()
    assert [c["name"] for c in body["columns"]] == ["run_id", "steps"]
    assert body["columns"][1]["kind"] == "number"
    assert [row[0] for row in body["rows"]] == ["fan-1", "old-1", "wait-act", "wait-live", "xss-1"]


def test_bad_paging_is_a_400(client: TestClient) -> None:
    assert client.get("/api/runs", params={"limit": 0}).status_code == 400
    assert client.get("/api/runs", params={"limit": 100000}).status_code == 400
    assert client.get("/api/runs", params={"status": "nope"}).status_code == 400
    assert client.get("/api/runs", params={"since": "yesterday"}).status_code == 400


def test_without_allow_actions_every_write_endpoint_refuses(
    client: TestClient, recorded: Recorded
) -> None:
    before = _statuses(recorded)
    page = client.get("/runs/wait-act").text
    assert 'data-actions=""' in page and _token(client)  # the token: for SQL
    for path, body in WRITES:
        for headers in ({}, {CSRF_HEADER: "guess"}):
            answer = client.post(path, json=body, headers=headers)
            assert answer.status_code == 403, path
            assert "--allow-actions" in answer.json()["error"]
    assert _statuses(recorded) == before


def test_with_actions_a_missing_or_wrong_csrf_token_is_refused(
    actions: TestClient, recorded: Recorded
) -> None:
    before = _statuses(recorded)
    for path, body in WRITES:
        for headers in ({}, {CSRF_HEADER: "guess"}):
            answer = actions.post(path, json=body, headers=headers)
            assert answer.status_code == 403, (path, headers)
            assert "CSRF token" in answer.json()["error"]
    assert _statuses(recorded) == before
    assert actions.get("/api/runs/fan-1-fork").status_code == 404


def _token(client: TestClient) -> str:
    page = client.get("/runs/wait-act").text
    return page.split('data-csrf="', 1)[1].split('"', 1)[0]


def test_with_actions_and_the_token_resume_works(actions: TestClient, recorded: Recorded) -> None:
    token = _token(actions)
    other_site = actions.post(
        "/api/runs/wait-act/resume",
        json={"value": True},
        headers={CSRF_HEADER: token, "origin": "http://evil.example"},
    )
    assert other_site.status_code == 403
    answer = actions.post(
        "/api/runs/wait-act/resume", json={"value": True}, headers={CSRF_HEADER: token}
    )
    assert answer.status_code == 200, answer.text
    deadline = time.monotonic() + 60  # generous: the run goes on in the server's loop
    while _statuses(recorded)["wait-act"][0] != "completed":
        assert time.monotonic() < deadline, "the resumed run never completed"
        time.sleep(0.05)
    state = actions.get("/api/runs/wait-act/state/" + str(_statuses(recorded)["wait-act"][1]))
    assert state.json()["state"]["values"]["answer"] is True
    again = actions.post(
        "/api/runs/wait-act/resume", json={"value": True}, headers={CSRF_HEADER: token}
    )
    assert again.status_code == 409 and "not" in again.json()["error"]


def test_a_long_run_ships_a_page_of_events_and_its_latest_steps(recorded: Recorded) -> None:
    from agentlog.eventlog import Event, RunStarted, StepCompleted, SuperstepCommitted
    from agentlog.ui._api_run import TIMELINE_STEPS

    steps = TIMELINE_STEPS + 5

    async def record() -> None:
        async with SqliteEventLog(str(recorded.db)) as log:
            epoch = await log.claim_writer("long")
            data: list[Any] = [RunStarted("long", "1", {}, "sync", "fp", start=["s"])]
            for superstep in range(steps):
                data += [
                    StepCompleted("s", superstep, 0, {}, ["s"]),
                    SuperstepCommitted(superstep, ["s"]),
                ]
            events = [Event("long", n, d, writer_epoch=epoch) for n, d in enumerate(data, 1)]
            await log.append(events)

    asyncio.run(record())
    with _client(recorded, allow_actions=False) as client:
        timeline = client.get("/api/runs/long/timeline").json()
        total = timeline["counts"]["supersteps"]  # recorded (and the next one, if open)
        assert total >= steps
        shipped = [s["superstep"] for s in timeline["steps"]]
        assert shipped == list(range(total - TIMELINE_STEPS, total))
        window = client.get("/api/runs/long/timeline", params={"first_step": 2}).json()
        assert [s["superstep"] for s in window["steps"]] == list(range(2, 2 + TIMELINE_STEPS))
        events = client.get("/api/runs/long/events", params={"after": 100}).json()
        assert [e["seq"] for e in events["events"]] == list(range(101, 301))
        assert events["last_seq"] == 1 + 2 * steps


def test_with_actions_and_the_token_fork_from_hot_and_archived_runs(actions: TestClient) -> None:
    token = {CSRF_HEADER: _token(actions)}
    assert actions.get("/api/runs/fan-1/origin").json() == {"forked_from": None}
    for origin in ("fan-1", "old-1"):  # old-1's events are only in the archive
        new = f"{origin}-fork"
        answer = actions.post(
            f"/api/runs/{origin}/fork", json={"at_seq": 4, "new_run_id": new}, headers=token
        )
        assert answer.status_code == 200, answer.text
        assert actions.get(f"/api/runs/{new}/origin").json() == {
            "forked_from": {"run_id": origin, "seq": 4}
        }
    taken = actions.post(
        "/api/runs/fan-1/fork", json={"at_seq": 4, "new_run_id": "fan-1-fork"}, headers=token
    )
    assert taken.status_code == 409 and "fan-1-fork" in taken.json()["error"]
    bad = actions.post("/api/runs/fan-1/fork", json={"at_seq": "4"}, headers=token)
    assert bad.status_code == 400 and "at_seq" in bad.json()["error"]
