"""``agentlog verify``: exit codes 0, 1 and 2, the table, --json, read-only."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentlog.cli import app
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.fixtures.verify import flows
from tests.fixtures.verify.history import ORDER_DONE, load_into

runner = CliRunner()
APP = "tests.fixtures.verify.flows"


@pytest.fixture
def log_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A SQLite log holding the committed histories; task bodies would write ``effects``."""
    monkeypatch.setenv(flows.EFFECTS_ENV, str(tmp_path / "effects.txt"))
    path = tmp_path / "log.db"

    async def fill() -> None:
        log = SqliteEventLog(str(path))
        await load_into(log)
        await log.close()

    asyncio.run(fill())
    return path


def _verify(log_path: Path, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["verify", "--log", f"sqlite:///{log_path}", *args])
    return result.exit_code, result.output


def test_unchanged_code_exits_0_with_a_summary(log_path: Path) -> None:
    code, output = _verify(log_path, "--app", f"{APP}:workflows", "--runs", "all")
    assert code == 0, output
    assert "3 runs checked: 3 matched, 0 diverged, 0 skipped" in output
    assert not (log_path.parent / "effects.txt").exists()


def test_a_divergence_exits_1_and_names_run_seq_and_kind(log_path: Path) -> None:
    before = log_path.read_bytes()
    code, output = _verify(log_path, "--app", f"{APP}:task_reordered", "--runs", "all", "--json")
    assert code == 1, output
    report = json.loads(output)
    assert (report["checked"], report["matched"], report["diverged"]) == (3, 2, 1)
    [diverged] = [r for r in report["runs"] if r["status"] == "diverged"]
    [divergence] = diverged["divergences"]
    assert (divergence["run_id"], divergence["seq"], divergence["kind"]) == (ORDER_DONE, 11, "task")
    assert divergence["expected"] == "task 'charge' (call 0)"
    assert log_path.read_bytes() == before  # nothing appended, nothing rewritten
    assert not (log_path.parent / "effects.txt").exists()


def test_the_table_shows_the_divergence(log_path: Path) -> None:
    code, output = _verify(log_path, "--app", f"{APP}:write_changed", "--runs", "all")
    assert code == 1
    assert "diverged" in output and "write" in output and "planned!" in output
    assert "3 runs checked: 1 matched, 2 diverged, 0 skipped" in output


def test_open_runs_are_the_default(log_path: Path) -> None:
    code, output = _verify(log_path, "--app", f"{APP}:task_reordered", "--json")
    assert code == 0, output  # the open order has not paid yet: nothing to reorder
    assert [r["run_id"] for r in json.loads(output)["runs"]] == ["order-open"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--app", "no_such_module_here:workflows"], "no module 'no_such_module_here'"),
        (["--app", f"{APP}:nothing"], "has no 'nothing'"),
        (["--app", f"{APP}:workflows", "--runs", "some"], "--runs some"),
        (["--app", f"{APP}:workflows", "--runs", "0"], "--runs 0"),
    ],
)
def test_bad_input_exits_2_and_changes_nothing(log_path: Path, args: list[str], says: str) -> None:
    before = log_path.read_bytes()
    code, output = _verify(log_path, *args)
    assert code == 2, output
    assert says in output
    assert log_path.read_bytes() == before


def test_without_app_only_the_demo_is_known_and_the_verdict_says_so(log_path: Path) -> None:
    """No --app is not bad input (the demo's workflow is always known), but runs
    of workflows nobody named diverge, and the message says to pass --app."""
    code, output = _verify(log_path, "--runs", "all", "--json")
    assert code == 1, output
    report = json.loads(output)
    assert {r["status"] for r in report["runs"]} == {"diverged"}
    for run in report["runs"]:
        [divergence] = run["divergences"]
        assert divergence["kind"] == "version"
        assert "--app" in divergence["message"]


def test_a_missing_log_exits_2(tmp_path: Path) -> None:
    code, _ = _verify(tmp_path / "nope.db", "--app", f"{APP}:workflows")
    assert code == 2
    assert not (tmp_path / "nope.db").exists()
