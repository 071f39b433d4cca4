"""The agentlog command: output shapes, time travel, diff, and one-line errors."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentlog.cli import app
from agentlog.demo import Outbox

runner = CliRunner()


def _json(args: list[str]) -> object:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_runs_lists_the_parked_run(log_url: str) -> None:
    rows = _json(["runs", "--log", log_url, "--json"])
    assert isinstance(rows, list) and len(rows) == 1
    assert rows[0]["run_id"] == "r1"
    assert rows[0]["workflow"] == "cli-wf"
    assert rows[0]["status"] == "waiting"
    assert rows[0]["steps"] == 1


def test_show_prints_the_timeline(log_url: str) -> None:
    rows = _json(["show", "r1", "--log", log_url, "--json"])
    assert isinstance(rows, list)
    assert [r["type"] for r in rows] == [
        "RunStarted",
        "StepCompleted",
        "SuperstepCommitted",
        "InterruptRaised",
    ]
    assert [r["seq"] for r in rows] == [1, 2, 3, 4]
    assert rows[1]["step"] == "first"
    table = runner.invoke(app, ["show", "r1", "--log", log_url])
    assert table.exit_code == 0 and "InterruptRaised" in table.stdout


def test_state_time_travel_and_diff(log_url: str) -> None:
    now = _json(["state", "r1", "--log", log_url, "--json"])
    assert isinstance(now, dict)
    assert now["values"] == {"notes": ["one"]} and now["status"] == "waiting"
    before = _json(["state", "r1", "--at", "2", "--log", log_url, "--json", "--internal"])
    assert isinstance(before, dict)
    assert before["values"] == {} and before["pending"] == {
        "0": {"step": "first", "writes": {"notes": ["one"]}, "goto": ["second"]}
    }
    changes = _json(["diff", "r1", "1", "4", "--log", log_url, "--json"])
    assert isinstance(changes, list)
    by_path = {c["path"]: c for c in changes}
    assert by_path["values.notes"] == {
        "path": "values.notes",
        "op": "added",
        "before": None,
        "after": ["one"],
    }
    assert by_path["status"]["after"] == "waiting"


def test_resume_from_the_cli_with_app_option(log_url: str) -> None:
    bad = runner.invoke(
        app,
        [
            "resume",
            "r1",
            "--value",
            '"yes"',
            "--log",
            log_url,
            "--app",
            "tests.cli.cli_workflows:workflows",
        ],
    )
    assert bad.exit_code == 2 and "must be bool" in bad.output
    ok = runner.invoke(
        app,
        [
            "resume",
            "r1",
            "--value",
            "true",
            "--log",
            log_url,
            "--app",
            "tests.cli.cli_workflows:workflows",
        ],
    )
    assert ok.exit_code == 0, ok.output
    assert "completed" in ok.stdout
    final = _json(["state", "r1", "--log", log_url, "--json"])
    assert isinstance(final, dict) and final["values"] == {"notes": ["one", "two"], "answer": True}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["show", "nope"], "unknown run 'nope'"),
        (["state", "nope"], "unknown run 'nope'"),
        (["state", "r1", "--at", "99"], "has no seq 99"),
        (["resume", "r1", "--value", "{not json"], "--value is not JSON"),
        (["cancel", "nope"], "unknown run 'nope'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(log_url: str, args: list[str], message: str) -> None:
    result = runner.invoke(app, [*args, "--log", log_url])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_bad_url_and_unreadable_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["runs", "--log", "mysql://db/x"])
    assert result.exit_code == 2 and "bad log URL" in result.output
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    result = runner.invoke(app, ["runs", "--log", f"sqlite:///{junk}"])
    assert result.exit_code == 2 and str(junk) in result.output
    assert junk.read_bytes() == b"this is not a database" * 100  # nothing was changed


@pytest.mark.process
def test_demo_crashes_resumes_and_sends_one_email(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    result = runner.invoke(app, ["demo", "--log", url, "--run-id", "demo-test"])
    assert result.exit_code == 0, result.output
    assert "SIGKILL" in result.stdout and "completed" in result.stdout
    # The narration names the task of every result (issue 21 item 16).
    assert "task done" not in result.stdout
    for name in ("llm.plan", "search.web", "search.papers", "search.news", "email.send"):
        assert re.search(rf"task {re.escape(name)} done in \d+ ms", result.stdout), name
    assert re.search(r"task search\.papers failed: ToolTimeout", result.stdout), result.stdout
    emails = Outbox(tmp_path / "outbox.db").sent()
    assert len(emails) == 1 and emails[0][2] == 1  # one email, delivered once
    with sqlite3.connect(tmp_path / "demo.db") as db:
        types_ = [t for (t,) in db.execute("SELECT type FROM events WHERE run_id='demo-test'")]
    assert types_.count("WriterClaimed") >= 2  # taken over after the kill, then resumed
    assert types_.count("RunCompleted") == 1
    assert types_.count("StepFailed") >= 1  # the flaky search failed once
