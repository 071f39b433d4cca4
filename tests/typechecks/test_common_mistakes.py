"""mypy --strict and pyright each report every common mistake, and nothing else (issue 24, item 7).

``common_mistakes.py`` holds the mistakes, each line marked ``# mistake: <what>``.
Both checkers run on it against this checkout's ``src``; pyright is the PyPI
wrapper of the dev extra (``python -m pyright``), which fetches its npm package
on first use.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HELD_OUT = Path(__file__).parent / "common_mistakes.py"
SRC = Path(__file__).resolve().parents[2] / "src"


def _marked() -> dict[int, str]:
    marker = "  # mistake: "  # after code, so the docstring's mention is not one
    lines = HELD_OUT.read_text().splitlines()
    return {n: line.split(marker)[1] for n, line in enumerate(lines, 1) if marker in line}


def _check(checker: str, reported: set[int], output: str) -> None:
    marked = _marked()
    assert len(marked) >= 15
    missed = {n: what for n, what in marked.items() if n not in reported}
    assert not missed, f"{checker} did not report: {missed}\n{output}"
    unexpected = sorted(reported - set(marked))
    assert not unexpected, f"{checker} reported lines with no mistake {unexpected}:\n{output}"


@pytest.mark.process
def test_mypy_strict_reports_every_common_mistake(tmp_path: Path) -> None:
    paths = [str(SRC), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental",
         "--cache-dir", str(tmp_path / "cache"), str(HELD_OUT)],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip
    reported = {int(m.group(1)) for m in re.finditer(r":(\d+): error:", result.stdout)}
    _check("mypy --strict", reported, result.stdout + result.stderr)


@pytest.mark.process
def test_pyright_reports_every_common_mistake(tmp_path: Path) -> None:
    config = tmp_path / "pyrightconfig.json"
    config.write_text(json.dumps({"extraPaths": [str(SRC)], "pythonVersion": "3.11"}))
    result = subprocess.run(
        [sys.executable, "-m", "pyright", "--outputjson", "--pythonpath", sys.executable,
         "-p", str(config), str(HELD_OUT)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert "No module named pyright" not in result.stderr, (
        "pyright is not installed: install the dev extra (pip install -e '.[dev]')"
    )
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"pyright gave no JSON report:\n{result.stdout}\n{result.stderr}")
    diagnostics = [d for d in report["generalDiagnostics"] if d["severity"] != "information"]
    reported = {d["range"]["start"]["line"] + 1 for d in diagnostics}
    _check("pyright", reported, json.dumps(diagnostics, indent=1))
