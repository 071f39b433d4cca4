"""`agentlog retry` continues a failed run; `agentlog recover` reports the runs it cannot take."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentlog.cli import app
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime, StepContext, Workflow, end
from tests.cli import cli_workflows

runner = CliRunner()
APP = ["--app", "tests.cli.cli_workflows:workflows"]


@pytest.fixture
def broken() -> Iterator[dict[str, bool]]:
    cli_workflows.BROKEN["yes"] = True
    yield cli_workflows.BROKEN
    cli_workflows.BROKEN["yes"] = True


def test_retry_continues_a_failed_run(tmp_path: Path, broken: dict[str, bool]) -> None:
    db = tmp_path / "log.db"

    async def fail_it() -> str:
        wf = cli_workflows.flaky_workflow()
        async with Runtime(SqliteEventLog(db), workflows=[wf]) as rt:
            await rt.start(wf, run_id="f", durability="sync")
            return (await rt.wait("f", timeout=30)).status

    assert asyncio.run(fail_it()) == "failed"
    url = f"sqlite:///{db}"
    wrong = runner.invoke(app, ["resume", "f", "--log", url, *APP])
    assert wrong.exit_code == 2 and "retry" in wrong.output  # the verb table speaks
    broken["yes"] = False
    result = runner.invoke(app, ["retry", "f", "--log", url, "--json", *APP])
    assert result.exit_code == 0, result.output
    assert '"status":"completed"' in result.stdout.replace(" ", "")
    again = runner.invoke(app, ["retry", "f", "--log", url, *APP])
    assert again.exit_code == 2 and "not failed" in again.output


def test_recover_reports_each_run_it_cannot_take_and_exits_1(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    ghost = Workflow("ghost", state={"x": "replace"})  # not in the --app list

    @ghost.step
    async def hang(ctx: StepContext) -> object:
        reached.set()
        await asyncio.Event().wait()  # hangs until the process stops
        return end(x=1)

    reached = asyncio.Event()

    async def orphan() -> None:
        reached.clear()
        log = SqliteEventLog(db)
        rt = Runtime(log, workflows=[ghost])
        await rt.start(ghost, run_id="g", durability="sync")
        await asyncio.wait_for(reached.wait(), 30)
        await rt.close()  # the writer stops mid-step: running, no live writer
        await log.close()

    asyncio.run(orphan())
    result = runner.invoke(app, ["recover", "--log", f"sqlite:///{db}", *APP])
    assert result.exit_code == 1, result.output
    assert "run g not recovered: UnknownWorkflowError" in result.output


def test_graph_prints_mermaid_for_the_loaded_workflows() -> None:
    result = runner.invoke(app, ["graph", "cli-wf", *APP])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[:2] == ["%% workflow cli-wf", "flowchart TD"]
    assert "    __start__ --> first" in lines
    missing = runner.invoke(app, ["graph", "nope", *APP])
    assert missing.exit_code == 2 and "no workflow 'nope'" in missing.output
