"""Every example in examples/ runs as a user would run it, and type-checks under mypy --strict."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.py"))


def test_there_are_examples() -> None:
    assert EXAMPLES


@pytest.mark.process
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs(example: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    result = subprocess.run(
        [sys.executable, str(example), str(tmp_path)],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "completed" in result.stdout, result.stdout
    assert result.stderr == "", "a library example must log nothing unless configured"


@pytest.mark.process
def test_examples_type_check(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path)]
    result = subprocess.run(
        [*command, *map(str, EXAMPLES)], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout
