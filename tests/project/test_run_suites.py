"""`make test` runs every suite to its end and fails at the end if any failed
(a failing main suite used to hide the LangGraph-oldest suite behind it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "run_suites.sh"


def _run(*suites: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *suites], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.process
def test_a_failed_suite_does_not_stop_the_next_and_fails_at_the_end(tmp_path: Path) -> None:
    marker = tmp_path / "second-ran"
    done = _run("exit 3", f"touch {marker}")
    assert marker.exists(), done.stdout
    assert done.returncode == 1
    assert "1 of 2 suites failed" in done.stdout
    assert "exit 3: exit 3" in done.stdout


@pytest.mark.process
def test_a_failure_in_the_last_suite_fails_too(tmp_path: Path) -> None:
    done = _run("true", "exit 5")
    assert done.returncode == 1
    assert "exit 5: exit 5" in done.stdout


@pytest.mark.process
def test_all_passing_suites_pass() -> None:
    done = _run("true", "true")
    assert done.returncode == 0
    assert "all 2 suites passed" in done.stdout


@pytest.mark.process
def test_make_test_runs_both_suites_through_the_script() -> None:
    plan = subprocess.run(
        ["make", "-n", "test"], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    line = next(ln for ln in plan.splitlines() if "run_suites.sh" in ln)
    assert "pytest -p no:cacheprovider" in line
    assert ".venv-langgraph-oldest/bin/python -m pytest" in line
