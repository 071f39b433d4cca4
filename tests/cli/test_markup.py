"""Data is printed as it is: never as Rich markup or emoji codes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentlog.cli import _render as render
from agentlog.cli import app
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime, StepContext, Workflow, end, goto
from agentlog.runtime._workflow import Next

runner = CliRunner()
RUN = "[bold]r[/bold]:x:"
NOTE = ":x: [bold]loud[/bold] [red]"


def _workflow() -> Workflow:
    wf = Workflow("markup-wf", state={"note": "replace"})

    @wf.step
    async def first(ctx: StepContext) -> Next:
        return goto("second", note=NOTE)

    @wf.step
    async def second(ctx: StepContext) -> Next:
        ctx.interrupt({"question": NOTE}, expects="bool")
        return end()

    return wf


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    async def build() -> None:
        async with Runtime(SqliteEventLog(tmp_path / "m.db"), workflows=[_workflow()]) as rt:
            await rt.start(_workflow(), run_id=RUN, durability="sync")
            await rt.wait(RUN)

    asyncio.run(build())
    monkeypatch.setattr(render.out, "width", 400)  # wide enough that nothing is cut
    return f"sqlite:///{tmp_path / 'm.db'}"


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["runs"], [RUN]),
        (["show", RUN], [RUN, NOTE]),
        (["state", RUN], [RUN, NOTE]),
        (["state", RUN, "--at", "2"], [RUN]),
        (["diff", RUN, "1", "3"], [RUN, NOTE]),
        (["sql", "SELECT run_id, payload_json FROM events WHERE type = 'StepCompleted'"], [RUN]),
        (["sql", "SELECT payload_json ->> '$.writes.note' AS note FROM events"], [NOTE]),
    ],
    ids=["runs", "show", "state", "state-at", "diff", "sql-id", "sql-note"],
)
@pytest.mark.process
def test_data_is_not_markup(log: str, tmp_path: Path, args: list[str], shown: list[str]) -> None:
    result = runner.invoke(app, [*args, "--log", log, "--archive", f"file://{tmp_path}/a"])
    assert result.exit_code == 0, result.output
    assert "❌" not in result.stdout
    for text in shown:
        assert text in result.stdout.replace('\\"', '"')
