"""``agentlog runs``: a child run names its parent run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from agentlog.cli import app
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime, StepContext, Workflow, end
from tests.support.runtime import config

runner = CliRunner()

child = Workflow("cli_child", state={"n": "replace"})


@child.step
async def double(ctx: StepContext) -> Any:
    return end(n=ctx.state["n"] * 2)


parent = Workflow("cli_parent", state={"ns": "replace"})


@parent.step
async def fan(ctx: StepContext) -> Any:
    handles = [await ctx.start_child(child, {"n": n}) for n in range(3)]
    return end(ns=[(await handle.result())["n"] for handle in handles])


def test_runs_lists_the_parent_of_each_child_run(tmp_path: Path) -> None:
    db = tmp_path / "agentlog.db"

    async def run_family() -> None:
        async with (
            SqliteEventLog(db) as log,
            Runtime(log, workflows=[parent, child], config=config()) as rt,
        ):
            await rt.start(parent, run_id="p")
            async with asyncio.timeout(30):  # bounded: a hang fails here
                while not (await rt.get_state("p")).is_terminal:  # noqa: ASYNC110 - polls the log
                    await asyncio.sleep(0.05)

    asyncio.run(run_family())
    listed = runner.invoke(app, ["runs", "--json", "--log", f"sqlite:///{db}"])
    assert listed.exit_code == 0, listed.output
    parents = {row["run_id"]: row["parent"] for row in json.loads(listed.stdout)}
    assert parents == {"p": "", **{f"p/fan/0:0:{i}": "p" for i in range(3)}}, parents
    table = runner.invoke(app, ["runs", "--log", f"sqlite:///{db}"], terminal_width=220)
    assert table.exit_code == 0, table.output
    rows = [line for line in table.output.splitlines() if "p/fan/" in line]
    assert len(rows) == 3 and all(line.rstrip(" │").endswith(" p") for line in rows), table.output
