"""``agentlog runs``: where each run's events are, and a fork's own start time."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from agentlog.archive import Archiver, LocalArchiveStore
from agentlog.cli import app
from agentlog.eventlog.events import utcnow
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.support.lg_threads import run_thread

runner = CliRunner()
APP = ["--app", "tests.cli.cli_workflows:workflows"]


def _runs(*args: str) -> dict[str, dict[str, Any]]:
    listed = runner.invoke(app, ["runs", "--json", *args])
    assert listed.exit_code == 0, listed.output
    return {row["run_id"]: row for row in json.loads(listed.stdout)}


def test_a_fork_lists_its_own_start_time_not_its_origins(log_url: str) -> None:
    origin = _runs("--log", log_url)["r1"]
    before_fork = utcnow()
    forked = runner.invoke(app, ["fork", "r1", "--at", "2", "--as", "r2", "--log", log_url, *APP])
    assert forked.exit_code == 0, forked.output
    rows = _runs("--log", log_url)
    assert rows["r1"]["started_at"] == origin["started_at"]
    started = datetime.fromisoformat(rows["r2"]["started_at"])
    assert started >= before_fork > datetime.fromisoformat(origin["started_at"]), rows["r2"]


def test_runs_says_whether_a_run_is_hot_archived_or_both(log_url: str, tmp_path: Path) -> None:
    db = Path(log_url[len("sqlite:///") :])
    done = runner.invoke(app, ["resume", "r1", "--value", "true", "--log", log_url, *APP])
    assert done.exit_code == 0, done.output  # r1 completed: archived and pruned below
    run_thread(db, "t1", answer=True)  # a thread: archived once idle, never pruned
    store = LocalArchiveStore(tmp_path / "archive")

    async def archive() -> None:
        async with SqliteEventLog(db) as log:
            await Archiver(log, store).run(now=utcnow() + timedelta(days=400))

    asyncio.run(archive())
    run_thread(db, "t2", answer=False)  # after the pass: only in the hot log
    where = {
        run_id: row["where"]
        for run_id, row in _runs("--log", log_url, "--archive", f"file://{store.root}").items()
    }
    assert where == {"r1": "archived", "t1": "both", "t2": "hot"}, where
    table = runner.invoke(
        app, ["runs", "--log", log_url, "--archive", f"file://{store.root}"], terminal_width=200
    )
    assert table.exit_code == 0, table.output
    header = next(line for line in table.stdout.splitlines() if "workflow" in line)
    assert "where" in header, table.stdout
    rows = {line.split()[1]: line for line in table.stdout.splitlines() if line.count("│") > 3}
    assert "both" in rows["t1"] and "archived" in rows["r1"] and "hot" in rows["t2"], rows
