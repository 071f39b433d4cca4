"""``agentlog runs``: a child run names its parent run."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from agentlog.cli import app
from tests.support.children import run_family

runner = CliRunner()


def test_runs_lists_the_parent_of_each_child_run(tmp_path: Path) -> None:
    db = tmp_path / "agentlog.db"

    run_family(db)
    listed = runner.invoke(app, ["runs", "--json", "--log", f"sqlite:///{db}"])
    assert listed.exit_code == 0, listed.output
    parents = {row["run_id"]: row["parent"] for row in json.loads(listed.stdout)}
    assert parents == {"p": "", **{f"p/fan/0:0:{i}": "p" for i in range(3)}}, parents
    table = runner.invoke(app, ["runs", "--log", f"sqlite:///{db}"], terminal_width=220)
    assert table.exit_code == 0, table.output
    rows = [line for line in table.output.splitlines() if "p/fan/" in line]
    assert len(rows) == 3 and all(line.rstrip(" │").endswith(" p") for line in rows), table.output
