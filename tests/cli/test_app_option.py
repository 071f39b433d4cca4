"""``--app`` finds a user's workflows as uvicorn finds an app: cwd module or file path."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentlog.cli import app

runner = CliRunner()
SOURCE = Path(__file__).with_name("cli_workflows.py")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A user's project folder holding ``myflows.py``, as the current directory.

    The import path and the module table are put back afterwards, so the
    module a test loaded is not found by the next test.
    """
    folder = tmp_path / "project"
    (folder / "agents").mkdir(parents=True)
    shutil.copy(SOURCE, folder / "myflows.py")
    shutil.copy(SOURCE, folder / "agents" / "support.py")
    monkeypatch.chdir(folder)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".")])
    before = set(sys.modules)
    yield folder
    for name in set(sys.modules) - before:
        del sys.modules[name]


def _resume(log_url: str, spec: str) -> tuple[int, str]:
    args = ["resume", "r1", "--value", "true", "--log", log_url, "--app", spec]
    result = runner.invoke(app, args)
    return result.exit_code, result.output


def test_module_in_the_current_directory(project: Path, log_url: str) -> None:
    code, output = _resume(log_url, "myflows:workflows")
    assert code == 0, output
    assert "completed" in output


def test_file_path(project: Path, log_url: str) -> None:
    code, output = _resume(log_url, "agents/support.py:workflows")
    assert code == 0, output
    assert "completed" in output


def test_absolute_file_path(project: Path, log_url: str) -> None:
    code, output = _resume(log_url, f"{project / 'agents' / 'support.py'}:workflows")
    assert code == 0, output


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("nosuchmodule:workflows", "no module 'nosuchmodule' in the current directory"),
        ("myflows", "write --app module:attribute or --app path/to/file.py:attribute"),
        ("myflows:nothing", "myflows has no 'nothing'; it defines workflows"),
        ("myflows:parked_workflow", "not a Workflow or a list of Workflows"),
        ("agents/missing.py:wf", "there is no file agents/missing.py"),
    ],
)
def test_errors_speak_cli(project: Path, log_url: str, spec: str, said: str) -> None:
    code, output = _resume(log_url, spec)
    assert code == 2
    assert said in output
    assert len(output.strip().splitlines()) == 1
    assert "ModuleNotFoundError" not in output and "No module named" not in output


def test_user_code_that_raises_is_named(project: Path, log_url: str) -> None:
    (project / "broken.py").write_text("raise RuntimeError('boom at import')\n")
    code, output = _resume(log_url, "broken:workflows")
    assert code == 2
    assert "your code raised RuntimeError while loading: boom at import" in output
