"""``agentlog ui`` as a command, and where the web stack may be imported."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import agentlog.ui
from agentlog.cli import app
from agentlog.eventlog._urls import open_log

SRC = Path(agentlog.ui.__file__).resolve().parents[1]


def test_ui_exports() -> None:
    assert agentlog.ui.__all__ == ["create_app"]


def test_help_names_the_options() -> None:
    result = CliRunner().invoke(app, ["ui", "--help"])
    assert result.exit_code == 0
    for option in ("--log", "--archive", "--host", "--port", "--allow-actions", "--no-browser"):
        assert option in result.output


def test_a_log_that_does_not_exist_is_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = f"sqlite:///{tmp_path / 'nope.db'}"
    result = CliRunner().invoke(app, ["ui", "--log", missing, "--no-browser", "--port", "0"])
    assert result.exit_code == 2
    assert "nope.db" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "nope.db").exists()  # the UI never creates a log


def test_a_bad_app_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["ui", "--log", f"sqlite:///{tmp_path / 'x.db'}", "--allow-actions", "--app", "no_mod:x"],
    )
    assert result.exit_code == 2 and "no module 'no_mod'" in result.output


def test_the_web_stack_stays_at_the_top() -> None:
    """Starlette and uvicorn live in ui/ (and the ui command); no component imports ui."""
    for path in SRC.rglob("*.py"):
        where = path.relative_to(SRC).as_posix()
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                web = name.split(".")[0] in ("starlette", "uvicorn")
                if web:
                    assert where.startswith("ui/") or where == "cli/_ui.py", where
                if name.startswith("agentlog.ui"):
                    assert where.startswith(("ui/", "cli/")), f"{where} imports {name}"


@pytest.mark.process
def test_json_prints_the_url_as_one_line(tmp_path: Path) -> None:
    """``--json`` gives scripts the URL (the server then runs until stopped)."""
    log_path = tmp_path / "ui.db"
    asyncio.run(_make_log(log_path))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "agentlog", "ui", "--log", f"sqlite:///{log_path}"]
    command += ["--no-browser", "--port", "0", "--json"]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    ) as proc:
        try:
            assert proc.stdout is not None
            shown = json.loads(proc.stdout.readline())
            assert shown["url"].startswith("http://127.0.0.1:")
            assert shown["actions"] is False and shown["loopback"] is True
        finally:
            proc.terminate()
            proc.wait(timeout=60)


async def _make_log(path: Path) -> None:
    log = await open_log(f"sqlite:///{path}")
    await log.close()
