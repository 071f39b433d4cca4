"""``agentlog send RUN TOPIC JSON``: a message into a run from the command line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from agentlog.cli import app
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime, StepContext, Workflow, end

runner = CliRunner()


def receiver() -> Workflow:
    wf = Workflow("cli-receiver", state={"got": "append"})

    @wf.step
    async def take(ctx: StepContext) -> Any:
        return end(got=[await ctx.recv("orders"), await ctx.recv("orders")])

    return wf


#: The app ``--app tests.cli.test_send:workflows`` loads.
workflows = [receiver()]


def parked_on_recv(tmp_path: Path) -> str:
    async def build() -> None:
        async with Runtime(SqliteEventLog(str(tmp_path / "log.db")), workflows=[receiver()]) as rt:
            await rt.start("cli-receiver", run_id="m", durability="sync")
            await rt.wait("m")

    asyncio.run(build())
    return f"sqlite:///{tmp_path / 'log.db'}"


def _send(*args: str) -> Any:
    result = runner.invoke(app, ["send", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_send_records_a_message_and_with_the_app_runs_the_run(tmp_path: Path) -> None:
    url = parked_on_recv(tmp_path)
    first = _send("m", "orders", '{"id": 1}', "--key", "o1", "--log", url, "--json")
    # Without the workflow's code the message is recorded for a worker.
    assert first == {"run_id": "m", "recorded": True, "status": "running"}
    again = _send("m", "orders", '{"id": 1}', "--key", "o1", "--log", url, "--json")
    assert again["recorded"] is False
    app_ = "tests.cli.test_send:workflows"
    done = _send("m", "orders", '"two"', "--log", url, "--app", app_, "--json")
    assert done == {"run_id": "m", "recorded": True, "status": "completed"}
    state = runner.invoke(app, ["state", "m", "--log", url, "--json"])
    assert json.loads(state.stdout)["values"]["got"] == [{"id": 1}, "two"]


def test_send_refuses_bad_json_an_unknown_run_and_an_ended_one(tmp_path: Path) -> None:
    url = parked_on_recv(tmp_path)
    bad = runner.invoke(app, ["send", "m", "orders", "{nope", "--log", url])
    assert bad.exit_code == 2 and "not JSON" in bad.output
    unknown = runner.invoke(app, ["send", "nobody", "orders", "1", "--log", url])
    assert unknown.exit_code != 0 and "unknown run 'nobody'" in unknown.output
    runner.invoke(app, ["cancel", "m", "--log", url])
    ended = runner.invoke(app, ["send", "m", "orders", "1", "--log", url])
    assert ended.exit_code != 0 and "cancelled" in ended.output
