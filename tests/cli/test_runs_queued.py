"""``agentlog runs`` and ``show``: a run waiting for room in its queue is ``queued``."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from agentlog.cli import app
from tests.support.queues import submit_two_queued

runner = CliRunner()


def test_runs_lists_queued_runs_with_their_queue(tmp_path: Path) -> None:
    db = tmp_path / "agentlog.db"
    submit_two_queued(db)
    url = f"sqlite:///{db}"
    listed = runner.invoke(app, ["runs", "--json", "--status", "queued", "--log", url])
    assert listed.exit_code == 0, listed.output
    rows = {row["run_id"]: row for row in json.loads(listed.stdout)}
    assert {r: (v["status"], v["queue"], v["priority"]) for r, v in rows.items()} == {
        "low": ("queued", "emails", 5),
        "high": ("queued", "emails", 0),
    }
    assert rows["high"]["admitted_at"] is None
    none = runner.invoke(app, ["runs", "--json", "--status", "running", "--log", url])
    assert json.loads(none.stdout) == []  # a queued run is not listed as running
    assert rows["low"]["driver"] == "room in queue 'emails' (priority 5)"
    table = runner.invoke(app, ["runs", "--log", url])
    assert table.exit_code == 0, table.output
    header = next(line for line in table.output.splitlines() if "status" in line)
    assert "queue" in header and table.output.count("│ queued │") == 2, table.output
    shown = runner.invoke(app, ["show", "high", "--log", url])
    assert shown.exit_code == 0, shown.output
    assert "(queued:" in shown.output, shown.output
