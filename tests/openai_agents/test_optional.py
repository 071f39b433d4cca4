"""agentlog.openai_agents is an optional extra: nothing else in agentlog imports the SDK."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import agentlog

ROOT = Path(agentlog.__file__).parent


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_only_the_integration_imports_the_sdk() -> None:
    for path in ROOT.rglob("*.py"):
        if path.is_relative_to(ROOT / "openai_agents"):
            continue
        for name in _imports(path):
            where = path.relative_to(ROOT)
            assert name.split(".")[0] != "agents", f"{where} imports {name}"
            assert not name.startswith("agentlog.openai_agents"), f"{where} imports {name}"


@pytest.mark.process
def test_import_agentlog_does_not_load_the_sdk() -> None:
    probe = "import sys, agentlog, agentlog.cli, agentlog.runtime; print('agents' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
