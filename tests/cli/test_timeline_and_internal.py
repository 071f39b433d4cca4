"""``show`` at 80 columns names each row's step and task; ``state`` and ``diff``
keep the runtime's bookkeeping out of the user's values unless ``--internal``
(issue 21 item 9)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentlog.cli import app
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime, StepContext, Workflow, end

runner = CliRunner()
RESULT = "alice@example.com"
#: The runtime's bookkeeping, which is not the user's state.
INTERNAL_FIELDS = {
    "tasks",
    "writer_epoch",
    "branch_tasks",
    "pending",
    "attempts",
    "resume_values",
    "reducers",
    "fingerprint",
    "limits",
}


async def lookup_email(user: str) -> str:
    """A stand-in for a directory service."""
    return RESULT


def _task_workflow() -> Workflow:
    wf = Workflow("render-wf", state={"user": "replace", "email": "replace"})

    @wf.step
    async def find_contact(ctx: StepContext) -> object:
        email = await ctx.task("directory.lookup_email", lookup_email, ctx.state["user"])
        return end(email=email)

    return wf


@pytest.fixture
def task_log(tmp_path: Path) -> str:
    """A SQLite log holding run ``t1``, completed after one task."""

    async def build() -> None:
        wf = _task_workflow()
        async with Runtime(SqliteEventLog(str(tmp_path / "t.db")), workflows=[wf]) as rt:
            await rt.start(wf, run_id="t1", input={"user": "alice"}, durability="sync")
            await rt.wait("t1")

    asyncio.run(build())
    return f"sqlite:///{tmp_path / 't.db'}"


def _rows(table: str) -> dict[str, str]:
    """Each body row of a printed timeline: its type -> the text of its last column,
    with the lines it wraps onto joined."""
    rows: dict[str, str] = {}
    current = ""
    for line in table.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) != 6:
            continue
        if cells[1].isdigit():
            current = cells[3]
            rows[current] = cells[4]
        elif current:
            rows[current] += " " + cells[4]
    return rows


def test_show_at_80_columns_names_each_task_row(task_log: str) -> None:
    result = runner.invoke(app, ["show", "t1", "--log", task_log], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    rows = _rows(result.stdout)
    key = json.loads(runner.invoke(app, ["show", "t1", "--log", task_log, "--json"]).stdout)[1][
        "payload"
    ]["key"]
    for kind in ("TaskStarted", "TaskCompleted"):
        # What identifies the row comes first: its step, its task's name, its key.
        assert rows[kind].startswith(f"find_contact directory.lookup_email key={key[:12]}…")
    assert f'result="{RESULT}"' in rows["TaskCompleted"]  # the payload wraps, not cut


def test_show_json_names_the_task_and_step_of_a_result(task_log: str) -> None:
    result = runner.invoke(app, ["show", "t1", "--log", task_log, "--json"])
    assert result.exit_code == 0, result.output
    done = [row for row in json.loads(result.stdout) if row["type"] == "TaskCompleted"]
    assert [(row["step"], row["task"]) for row in done] == [
        ("find_contact", "directory.lookup_email")
    ]


@pytest.mark.process
def test_state_hides_bookkeeping_unless_internal(task_log: str) -> None:
    plain = json.loads(runner.invoke(app, ["state", "t1", "--log", task_log, "--json"]).stdout)
    assert plain["values"] == {"user": "alice", "email": RESULT}
    assert not INTERNAL_FIELDS & set(plain), sorted(INTERNAL_FIELDS & set(plain))
    full = runner.invoke(app, ["state", "t1", "--log", task_log, "--json", "--internal"])
    everything = json.loads(full.stdout)
    assert set(everything) >= INTERNAL_FIELDS
    assert [t["name"] for t in everything["tasks"].values()] == ["directory.lookup_email"]
    shown = runner.invoke(app, ["state", "t1", "--log", task_log, "--internal"])
    assert shown.exit_code == 0 and "writer_epoch" in shown.stdout and RESULT in shown.stdout


def test_diff_hides_bookkeeping_unless_internal(task_log: str) -> None:
    args = ["diff", "t1", "1", "6", "--log", task_log, "--json"]
    plain = json.loads(runner.invoke(app, args).stdout)
    paths = {change["path"].split(".")[0] for change in plain}
    assert "values" in paths and not paths & INTERNAL_FIELDS, paths
    full = json.loads(runner.invoke(app, [*args, "--internal"]).stdout)
    assert {"tasks", "writer_epoch", "branch_tasks"} & {c["path"] for c in full}
    table = runner.invoke(app, args[:-1])
    assert "values.email" in table.stdout and "writer_epoch" not in table.stdout
