"""Every command takes --json and prints valid JSON; errors are one line, never a traceback."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from agentlog.cli import app
from agentlog.eventlog import Event, RunStarted, StepCompleted, SuperstepCommitted
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime, StepContext, Workflow, end
from agentlog.runtime._workflow import Next

runner = CliRunner()


def _strict_json(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise AssertionError(f"not valid JSON: bare {name}")

    return json.loads(text, parse_constant=refuse)


def test_every_command_takes_json() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    commands = group.commands
    assert {"runs", "show", "state", "diff", "resume", "cancel", "recover", "retry", "demo"} <= set(
        commands
    )
    assert {"archive", "sql"} <= set(commands)
    lacking = [n for n, c in commands.items() if not any(p.name == "as_json" for p in c.params)]
    assert lacking == []


def test_json_never_prints_nan_or_infinity(tmp_path: Path) -> None:
    wf = Workflow("floats", state={"score": "replace", "scores": "replace"})

    @wf.step
    async def only(ctx: StepContext) -> Next:
        return end(score=math.nan, scores=[math.inf, -math.inf, 1.5])

    async def build() -> None:
        async with Runtime(SqliteEventLog(tmp_path / "f.db"), workflows=[wf]) as rt:
            await rt.start(wf, run_id="f", durability="sync")
            await rt.wait("f")

    asyncio.run(build())
    log = f"sqlite:///{tmp_path / 'f.db'}"
    state = runner.invoke(app, ["state", "f", "--log", log, "--json"])
    assert state.exit_code == 0, state.output
    assert _strict_json(state.stdout)["values"] == {"score": None, "scores": [None, None, 1.5]}
    for args in (["show", "f"], ["diff", "f", "1", "4"]):
        shown = runner.invoke(app, [*args, "--log", log, "--json"])
        assert shown.exit_code == 0, shown.output
        _strict_json(shown.stdout)


def test_demo_on_a_memory_log_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["demo", "--log", "memory://"])
    assert result.exit_code == 2
    assert isinstance(result.exception, SystemExit)  # no exception escaped
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "other processes can share" in lines[0]


def test_malformed_stored_writes_are_no_traceback(tmp_path: Path) -> None:
    """A damaged log (StepCompleted.writes not a map) is reported in one line."""

    async def damage() -> None:
        async with SqliteEventLog(tmp_path / "bad.db") as log:
            epoch = await log.claim_writer("bad", owner="test")
            start = RunStarted("wf", "1", {}, "sync", "fp", {}, ["a"])
            broken = StepCompleted("a", 0, 0, [1, 2], [])  # type: ignore[arg-type]
            await log.append(
                [
                    Event("bad", 1, start, writer_epoch=epoch),
                    Event("bad", 2, broken, writer_epoch=epoch),
                    Event("bad", 3, SuperstepCommitted(0, []), writer_epoch=epoch),
                ]
            )

    asyncio.run(damage())
    result = runner.invoke(app, ["state", "bad", "--log", f"sqlite:///{tmp_path / 'bad.db'}"])
    assert result.exit_code != 0, result.output
    assert isinstance(result.exception, SystemExit)  # no exception escaped
    assert len(result.output.strip().splitlines()) == 1
    assert result.output.startswith("error:")


@pytest.mark.parametrize(
    "args",
    [
        ["resume", "r1", "--value", "true"],
        ["cancel", "r1"],
        ["recover"],
    ],
    ids=["resume", "cancel", "recover"],
)
def test_control_commands_print_json(log_url: str, args: list[str]) -> None:
    extra = ["--app", "tests.cli.cli_workflows:workflows"] if args[0] != "cancel" else []
    result = runner.invoke(app, [*args, "--log", log_url, "--json", *extra])
    assert result.exit_code == 0, result.output
    data = _strict_json(result.stdout)
    if args[0] == "recover":
        assert data == {"recovered": [], "failed": {}, "held": []}
    else:
        assert data["run_id"] == "r1" and data["status"] in ("completed", "cancelled")
