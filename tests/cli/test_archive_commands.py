"""The `archive` and `sql` commands."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from agentlog.cli import app
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.archive.helpers import record_run


def _seed(db: Path) -> None:
    async def go() -> None:
        log = SqliteEventLog(db)
        await record_run(log, "a", tag=1)
        await record_run(log, "b", end="failed", tag=2)
        await log.close()

    asyncio.run(go())


@pytest.mark.process
def test_archive_then_sql(tmp_path: Path) -> None:
    db = tmp_path / "hot.db"
    _seed(db)
    opts = ["--log", f"sqlite:///{db}", "--archive", f"file://{tmp_path}/arch"]
    runner = CliRunner()
    dry = runner.invoke(app, ["archive", "--dry-run", *opts])
    assert dry.exit_code == 0, dry.output
    assert "dry run" in dry.output and "38" in dry.output
    assert not (tmp_path / "arch").exists()
    done = runner.invoke(app, ["archive", *opts])
    assert done.exit_code == 0, done.output
    assert "bytes after (parquet)" in done.output and "runs pruned from hot log" in done.output

    as_json = runner.invoke(
        app, ["sql", "SELECT run_id, status FROM runs ORDER BY run_id", "--format", "json", *opts]
    )
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout) == [
        {"run_id": "a", "status": "completed"},
        {"run_id": "b", "status": "failed"},
    ]
    as_csv = runner.invoke(app, ["sql", "SELECT count(*) AS n FROM events", "-f", "csv", *opts])
    assert as_csv.stdout.splitlines() == ['"n"', "38"]
    table = runner.invoke(app, ["sql", "SELECT name, attempts FROM tasks LIMIT 1", *opts])
    assert table.exit_code == 0 and "attempts" in table.stdout
    out = tmp_path / "out.parquet"
    parquet = runner.invoke(
        app, ["sql", "SELECT * FROM events", "-f", "parquet", "--out", str(out), *opts]
    )
    assert parquet.exit_code == 0, parquet.output
    assert pq.read_table(out).num_rows == 38


@pytest.mark.process
def test_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "hot.db"
    _seed(db)
    opts = ["--log", f"sqlite:///{db}", "--archive", f"file://{tmp_path}/arch"]
    runner = CliRunner()
    bad_sql = runner.invoke(app, ["sql", "SELECT * FROM nope", *opts])
    assert bad_sql.exit_code == 2
    assert "views you can query are: events, runs, tasks, interrupts" in bad_sql.output
    running = runner.invoke(app, ["archive", "--run", "nope", *opts])
    assert running.exit_code == 2 and "unknown run 'nope'" in running.output
    bad_url = runner.invoke(app, ["archive", "--log", f"sqlite:///{db}", "--archive", "ftp://x"])
    assert bad_url.exit_code == 2 and "bad archive URL" in bad_url.output
    no_out = runner.invoke(app, ["sql", "SELECT 1", "-f", "parquet", *opts])
    assert no_out.exit_code == 2 and "--out" in no_out.output
    bad_policy = runner.invoke(app, ["archive", "--retention", "wf=forever", *opts])
    assert bad_policy.exit_code == 2 and "bad retention mode" in bad_policy.output
