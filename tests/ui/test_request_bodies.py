"""The actions' JSON bodies: bounded in size and nesting before they are decoded.

A body nested 100,000 levels deep used to reach ``json.loads`` whole and
end in a ``RecursionError`` (a 500); every action must answer a typed 400
(or a 413 for a body too large) and change nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.ui import create_app
from agentlog.ui._actions import CSRF_HEADER
from agentlog.ui._bodies import MAX_BODY_BYTES, MAX_BODY_DEPTH
from tests.support.ui import Recorded
from tests.ui.ui_workflows import workflows

ACTIONS = ("/api/runs/wait-act/resume", "/api/runs/wait-act/cancel", "/api/runs/fan-1/fork")


def nested(levels: int, inner: str = "1") -> str:
    return "[" * levels + inner + "]" * levels


@pytest.fixture
def http(recorded: Recorded) -> Iterator[TestClient]:
    """A UI with actions, its CSRF token set; a server failure is a 500, not an exception."""
    app = create_app(
        recorded.log_url, recorded.archive_url, allow_actions=True, workflows=workflows
    )
    with TestClient(app, base_url="http://127.0.0.1:8765", raise_server_exceptions=False) as client:
        page = client.get("/runs/wait-act").text
        client.headers[CSRF_HEADER] = page.split('data-csrf="', 1)[1].split('"', 1)[0]
        client.headers["content-type"] = "application/json"
        yield client


def statuses(recorded: Recorded) -> dict[str, tuple[str, int]]:
    async def read() -> dict[str, tuple[str, int]]:
        async with SqliteEventLog(str(recorded.db)) as log:
            return {i.run_id: (i.status, i.last_seq) for i in await log.list_runs()}

    return asyncio.run(read())


def test_a_deeply_nested_body_is_a_typed_400_on_every_action(
    http: TestClient, recorded: Recorded
) -> None:
    before = statuses(recorded)
    deep = nested(100_000)
    for path in ACTIONS:
        for body in (deep, '{"value": ' + deep + "}", '{"updates": {"k": ' + deep + "}}"):
            answer = http.post(path, content=body)
            assert answer.status_code == 400, (path, answer.status_code, answer.text[:200])
            error = answer.json()["error"]
            assert f"deeper than {MAX_BODY_DEPTH} levels" in error, (path, error)
    assert statuses(recorded) == before


def test_a_body_past_the_size_bound_is_a_413(http: TestClient, recorded: Recorded) -> None:
    before = statuses(recorded)
    big = '{"reason": "' + "r" * MAX_BODY_BYTES + '"}'
    for path in ACTIONS:
        answer = http.post(path, content=big)
        assert answer.status_code == 413, (path, answer.text[:200])
        assert f"{MAX_BODY_BYTES:,} bytes" in answer.json()["error"]
    assert statuses(recorded) == before


def test_bodies_within_the_bounds_still_act(http: TestClient, recorded: Recorded) -> None:
    """Brackets inside strings do not count as nesting; the deepest allowed value is taken."""
    for bad in (b"\xff\xfe", b"[1, 2]", b'{"value": '):
        answer = http.post("/api/runs/wait-act/resume", content=bad)
        assert answer.status_code == 400, bad
    fork = {"at_seq": 3, "new_run_id": "fan-1-deep", "updates": {"topic": nested(200)}}
    forked = http.post("/api/runs/fan-1/fork", json=fork)
    assert forked.status_code == 200, forked.text
    deepest = nested(MAX_BODY_DEPTH - 1)  # inside the body's own object
    resumed = http.post("/api/runs/wait-act/resume", content='{"value": ' + deepest + "}")
    assert resumed.status_code == 200, resumed.text
    cancelled = http.post("/api/runs/wait-live/cancel", json={"reason": "[" * 5000})
    assert cancelled.status_code == 200, cancelled.text
    assert statuses(recorded)["wait-live"][0] == "cancelled"
