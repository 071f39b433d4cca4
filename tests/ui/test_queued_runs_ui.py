"""The UI lists a run waiting for room in its queue as ``queued``, with its
queue and priority, on the runs page (``/api/runs``) and the run page."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from agentlog.ui import create_app
from tests.support.queues import submit_two_queued


def test_queued_runs_are_listed_and_filtered_as_queued(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    wf = submit_two_queued(db)
    app = create_app(f"sqlite:///{db}", f"file://{tmp_path / 'archive'}", workflows=[wf])
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        assert "queued" in client.get("/api/workflows").json()["statuses"]
        page = client.get("/api/runs", params={"status": "queued"})
        assert page.status_code == 200, page.text
        body = page.json()
        rows = {
            row["run_id"]: (row["status"], row["queue"], row["priority"]) for row in body["rows"]
        }
        assert rows == {"low": ("queued", "emails", 5), "high": ("queued", "emails", 0)}
        assert body["counts"].get("queued") == 2 and body["counts"].get("running", 0) == 0
        info = client.get("/api/runs/high").json()["info"]
        assert (info["status"], info["queue"], info["priority"]) == ("queued", "emails", 0)
    static = Path(__file__).parents[2] / "src/agentlog/ui/static"
    assert "cell(run.queue ? run.queue" in (static / "runs.js").read_text()  # the queue column
    assert 'info.status === "queued"' in (static / "run.js").read_text()  # the run page says so
