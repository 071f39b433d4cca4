"""Read commands never create a log; bad filter values are usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentlog.cli import app

runner = CliRunner()


@pytest.mark.parametrize(
    "args",
    [
        ["runs"],
        ["show", "r1"],
        ["state", "r1"],
        ["diff", "r1", "1", "2"],
        ["sql", "SELECT 1"],
        ["archive", "--dry-run"],
    ],
    ids=["runs", "show", "state", "diff", "sql", "archive"],
)
@pytest.mark.process
def test_a_mistyped_log_is_exit_2_and_creates_nothing(tmp_path: Path, args: list[str]) -> None:
    missing = tmp_path / "no" / "such" / "dir" / "x.db"
    result = runner.invoke(
        app, [*args, "--log", f"sqlite:///{missing}", "--archive", f"file://{tmp_path}/arch"]
    )
    assert result.exit_code == 2, result.output
    assert f"no log at {missing}" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # no file, no folder


def test_runs_status_must_be_a_real_status(log_url: str) -> None:
    bogus = runner.invoke(app, ["runs", "--status", "bogus", "--log", log_url])
    assert bogus.exit_code == 2
    assert "bogus" in bogus.output and "waiting" in bogus.output  # names the choices
    waiting = runner.invoke(app, ["runs", "--status", "waiting", "--log", log_url, "--json"])
    assert waiting.exit_code == 0 and '"r1"' in waiting.stdout
    done = runner.invoke(app, ["runs", "--status", "completed", "--log", log_url, "--json"])
    assert done.exit_code == 0 and done.stdout.strip() == "[]"


def test_runs_says_who_moves_each_run_on(tmp_path: Path) -> None:
    import asyncio
    import json
    from typing import Any

    from agentlog.eventlog.sqlite._log import SqliteEventLog
    from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end

    wf = Workflow("napper", state={"x": "replace"})

    @wf.step
    async def nap(ctx: StepContext) -> Any:
        await ctx.sleep(3600)
        return end(x=1)

    db = tmp_path / "log.db"

    async def setup() -> None:
        async with SqliteEventLog(db) as log:
            client = RuntimeConfig(execute=False, worker=False)
            async with Runtime(log, workflows=[wf], config=client) as rt:
                await rt.submit(wf, run_id="queued")  # nobody drives it
            here = RuntimeConfig(worker=False, durability="sync")
            async with Runtime(log, workflows=[wf], config=here) as rt:
                await rt.start(wf, run_id="sleeping")
                await rt.get_state("sleeping")
                while (await log.get_run("sleeping")).status != "waiting":  # noqa: ASYNC110
                    await asyncio.sleep(0.01)

    asyncio.run(setup())
    result = runner.invoke(app, ["runs", "--json", "--log", f"sqlite:///{db}"])
    assert result.exit_code == 0, result.output
    by_id = {row["run_id"]: row for row in json.loads(result.stdout)}
    assert by_id["queued"]["driver"] == "no worker yet (needs one that knows 'napper')"
    assert by_id["sleeping"]["driver"].startswith("timer at ")
    assert by_id["sleeping"]["wake_at"] is not None
