"""``agentlog fork RUN --at SEQ --as NEW [--set JSON]``, in process on a real SQLite log."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentlog.archive import Archiver, LocalArchiveStore
from agentlog.cli import app
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime
from tests.support.fork import CALLS, chain_workflow, events_of, reset, seq_of
from tests.support.runtime import config

runner = CliRunner()
APP = ["--app", "tests.support.fork:chain"]


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    reset()


def _origin(db: Path, *, archive: Path | None = None) -> int:
    """Run the chain to its end as ``origin`` (archived and pruned into
    ``archive`` if given); return the seq after its ``think`` step committed."""

    async def build() -> int:
        wf = chain_workflow()
        async with Runtime(SqliteEventLog(db), workflows=[wf], config=config()) as rt:
            await rt.start(wf, run_id="origin", input={"topic": "cats"}, durability="sync")
            await rt.wait("origin", timeout=30)
            events = await events_of(rt.log, "origin")
            if archive is not None:
                await Archiver(rt.log, LocalArchiveStore(archive)).run()
            return seq_of(events, "SuperstepCommitted", superstep=1)

    return asyncio.run(build())


def test_fork_runs_the_new_run_and_says_where_it_came_from(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    at = _origin(db)
    url = f"sqlite:///{db}"
    args = ["fork", "origin", "--at", str(at), "--as", "what-if", "--log", url, *APP]
    result = runner.invoke(app, [*args, "--set", '{"topic": "dogs"}', "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["forked_from"] == {"run_id": "origin", "seq": at}
    assert (out["run_id"], out["status"], out["updates"]) == ("what-if", "completed", ["topic"])
    assert (CALLS.count["task.think"], CALLS.count["task.write"]) == (1, 2)
    state = runner.invoke(app, ["state", "what-if", "--log", url, "--json"])
    assert json.loads(state.stdout)["values"]["text"] == "task.write#2 on dogs"
    plain = runner.invoke(
        app, ["fork", "origin", "--at", "1", "--as", "second", "--log", url, *APP]
    )
    assert plain.exit_code == 0, plain.output
    assert "run second: forked from run origin at seq 1; completed" in plain.stdout


def test_fork_reads_an_archived_origin_with_archive(tmp_path: Path) -> None:
    db, folder = tmp_path / "log.db", tmp_path / "archive"
    at = _origin(db, archive=folder)
    url = f"sqlite:///{db}"
    args = ["fork", "origin", "--at", str(at), "--as", "f", "--log", url, *APP]
    missing = runner.invoke(app, [*args, "--archive", f"file://{tmp_path / 'none'}"])
    assert missing.exit_code == 2 and "archived" in missing.output
    result = runner.invoke(app, [*args, "--archive", f"file://{folder}", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "completed"
    assert CALLS.count["task.write"] == 2 and CALLS.count["task.think"] == 1


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--set", "{not json"], "--set is not JSON"),
        (["--set", "[1, 2]"], "JSON object"),
        (["--set", '{"nonsense": 1}'], "not in the state"),
        (["--at", "0"], "1 or more"),
        (["--at", "999"], "has no seq 999"),
        (["--as", "origin"], "exists already"),
    ],
)
def test_bad_input_exits_2_and_records_nothing(tmp_path: Path, extra: list[str], says: str) -> None:
    db = tmp_path / "log.db"
    _origin(db)
    url = f"sqlite:///{db}"
    origin_before = runner.invoke(app, ["show", "origin", "--log", url, "--json"]).stdout
    args = ["fork", "origin", "--at", "2", "--as", "new", "--log", url, *APP, *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output
    shown = runner.invoke(app, ["runs", "--log", url, "--json"])
    assert [r["run_id"] for r in json.loads(shown.stdout)] == ["origin"]
    assert runner.invoke(app, ["show", "origin", "--log", url, "--json"]).stdout == origin_before


def test_an_unknown_origin_or_workflow_exits_2(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    _origin(db)
    url = f"sqlite:///{db}"
    unknown = runner.invoke(app, ["fork", "ghost", "--at", "1", "--as", "n", "--log", url, *APP])
    assert unknown.exit_code == 2 and "ghost" in unknown.output
    no_code = runner.invoke(app, ["fork", "origin", "--at", "1", "--as", "n", "--log", url])
    assert no_code.exit_code == 2 and "fork-chain" in no_code.output and "--app" in no_code.output
