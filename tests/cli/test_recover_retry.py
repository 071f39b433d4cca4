"""`agentlog retry` continues a failed run; `agentlog recover` reports the runs it cannot take."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentlog.cli import app
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end
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


def _failed_flaky_run(db: Path) -> None:
    async def fail_it() -> str:
        wf = cli_workflows.flaky_workflow()
        async with Runtime(SqliteEventLog(db), workflows=[wf]) as rt:
            await rt.start(wf, run_id="f", durability="sync")
            return (await rt.wait("f", timeout=30)).status

    assert asyncio.run(fail_it()) == "failed"


def test_retry_exits_1_when_the_run_fails_again(tmp_path: Path, broken: dict[str, bool]) -> None:
    db = tmp_path / "log.db"
    _failed_flaky_run(db)
    url = f"sqlite:///{db}"
    again = runner.invoke(app, ["retry", "f", "--log", url, *APP])  # still broken
    assert again.exit_code == 1, again.output
    assert "run f: failed at seq" in again.stdout
    said = " ".join(again.stderr.split())
    assert "run f failed after the retry: step 'work' failed after 1 attempt(s): " in said
    assert said.endswith("RuntimeError: the model is down"), said
    as_json = runner.invoke(app, ["retry", "f", "--log", url, "--json", *APP])
    assert as_json.exit_code == 1, as_json.output
    assert '"status":"failed"' in as_json.stdout.replace(" ", "")
    helped = runner.invoke(app, ["retry", "--help"])
    assert "Exit codes" in helped.stdout and "failed again" in helped.stdout


def test_a_workflow_not_loaded_says_pass_app_in_every_command(
    tmp_path: Path, log_url: str, broken: dict[str, bool]
) -> None:
    """resume, retry, fork and recover name the CLI's way to load a workflow
    (``--app``), not the library's ``Runtime(workflows=[...])``."""
    db = tmp_path / "flaky.db"
    _failed_flaky_run(db)
    calls = [
        ["resume", "r1", "--value", "true", "--log", log_url],
        ["fork", "r1", "--at", "2", "--as", "r2", "--log", log_url],
        ["retry", "f", "--log", f"sqlite:///{db}"],
    ]
    for args in calls:
        result = runner.invoke(app, args)
        said = " ".join(result.output.split())
        assert result.exit_code == 2, said
        assert "is not registered" in said and "--app module:attr" in said, said
        assert "Runtime(workflows" not in said, said


def test_recover_says_pass_app_for_a_run_it_cannot_take(tmp_path: Path) -> None:
    db = tmp_path / "log.db"

    async def orphan() -> None:  # a run of cli-flaky whose writer is gone, lease ended
        wf = cli_workflows.flaky_workflow()
        client = RuntimeConfig(owner="client", execute=False, worker=False)
        async with Runtime(SqliteEventLog(db), workflows=[wf], config=client) as rt:
            await rt.submit(wf, run_id="o", durability="sync")

    asyncio.run(orphan())
    result = runner.invoke(app, ["recover", "--log", f"sqlite:///{db}"])  # no --app
    said = " ".join(result.output.split())
    assert result.exit_code == 1, said
    assert "run o not recovered: UnknownWorkflowError" in said and "--app module:attr" in said
    assert "Runtime(workflows" not in said, said
