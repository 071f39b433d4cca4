"""agentlog.testing: shipped in the package, importable by third parties, and
never imported (nor pytest and Hypothesis) by ``import agentlog``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import agentlog
import agentlog.testing
from agentlog.testing import race_in_processes

_SRC = str(Path(agentlog.__file__).resolve().parents[1])


def _modules_after(code: str, cwd: Path) -> list[str]:
    """The modules loaded by a fresh interpreter that runs ``code`` in ``cwd``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = _SRC  # the package only: not the repo, so no `tests` package
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys; print(json.dumps(sorted(sys.modules)))"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return list(json.loads(out.stdout.splitlines()[-1]))


@pytest.mark.process
def test_import_agentlog_never_imports_the_test_tools(tmp_path: Path) -> None:
    loaded = _modules_after(
        "import agentlog, agentlog.eventlog, agentlog.runtime, agentlog.archive, agentlog.cli",
        tmp_path,
    )
    assert "agentlog.eventlog" in loaded  # the imports did run
    for tool in ("pytest", "_pytest", "hypothesis", "agentlog.testing"):
        assert tool not in loaded, f"import agentlog loaded {tool}"


@pytest.mark.process
def test_the_suite_imports_from_the_package_alone(tmp_path: Path) -> None:
    loaded = _modules_after("import agentlog.testing", tmp_path)
    assert "agentlog.testing" in loaded and "hypothesis" in loaded
    assert not [m for m in loaded if m == "tests" or m.startswith("tests.")]


def test_testing_exports() -> None:
    assert agentlog.testing.__all__ == [
        "MODEL_SETTINGS",
        "T0",
        "EventLogContract",
        "EventLogMachine",
        "RunModel",
        "ev",
        "every_event_type",
        "race",
        "race_in_processes",
        "read_all",
        "seed",
        "started",
    ]
    for name in agentlog.testing.__all__:
        assert hasattr(agentlog.testing, name)


@pytest.mark.process
def test_racing_processes_import_the_helper_from_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer processes find agentlog.testing with no repo on their path."""
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'race.db'}"
    results = race_in_processes(url, writers=2, claims=2, appends=3, run_id="pkg")
    written = sorted(pair for pairs in results for pair in pairs)
    assert [seq for seq, _ in written] == list(range(1, len(written) + 1))
    assert written and all(1 <= epoch <= 4 for _, epoch in written)
