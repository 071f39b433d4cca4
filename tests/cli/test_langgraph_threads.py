"""LangGraph threads in the read commands: runs, show, state."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from agentlog.cli import app
from tests.support.lg_threads import run_thread

runner = CliRunner()


def test_show_names_each_checkpoints_step_and_each_writes_node(tmp_path: Path) -> None:
    db = tmp_path / "lg.db"
    run_thread(db, "t1", answer=True)
    shown = runner.invoke(app, ["show", "t1", "--log", f"sqlite:///{db}", "--json"])
    assert shown.exit_code == 0, shown.output
    rows = json.loads(shown.stdout)
    steps = [r["step"] for r in rows if r["type"] == "CheckpointSaved"]
    assert steps == ["step -1", "step 0", "step 1", "step 2"]
    nodes = [r["step"] for r in rows if r["type"] == "WritesSaved"]
    assert {"plan", "approve", "(resume)"} <= set(nodes)
    asked = [
        r for r in rows if r["type"] == "WritesSaved" and "__interrupt__" in r["payload"]["writes"]
    ]
    assert asked and "ok?" in json.dumps(asked[0])  # decoded, readable
    # The last node's writes may be recorded after the checkpoint that follows
    # them (LangGraph puts them from another thread); they name their own.
    last = [r for r in rows if r["type"] == "CheckpointSaved"][-1]["payload"]
    assert last["changed"]["notes"] in (["planned", "approved:yes"], {"appended": ["approved:yes"]})


def test_runs_says_a_thread_is_moved_on_by_its_app_and_state_shows_the_values(
    tmp_path: Path,
) -> None:
    db = tmp_path / "lg.db"
    run_thread(db, "parked", answer=False)
    run_thread(db, "done", answer=True)
    listed = runner.invoke(app, ["runs", "--log", f"sqlite:///{db}", "--json"])
    assert listed.exit_code == 0, listed.output
    by_id = {r["run_id"]: r for r in json.loads(listed.stdout)}
    assert by_id["done"]["driver"] == "its LangGraph app"
    assert by_id["parked"]["workflow"] == "langgraph"
    assert by_id["parked"]["status"] == "waiting"
    assert by_id["parked"]["driver"] == "an answer: invoke with Command(resume=...)"
    state = runner.invoke(app, ["state", "parked", "--log", f"sqlite:///{db}", "--json"])
    assert state.exit_code == 0, state.output
    shown = json.loads(state.stdout)
    assert shown["status"] == "waiting" and shown["values"]["notes"] == ["planned"]
