"""agentlog.pydantic_ai is an optional extra: nothing else in agentlog imports it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import agentlog


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_only_the_package_imports_pydantic_ai() -> None:
    root = Path(agentlog.__file__).parent
    for path in root.rglob("*.py"):
        if path.is_relative_to(root / "pydantic_ai"):
            continue
        for name in _imports(path):
            where = path.relative_to(root)
            assert not name.startswith(("agentlog.pydantic_ai", "pydantic_ai")), f"{where}: {name}"


@pytest.mark.process
def test_import_agentlog_loads_no_pydantic_ai() -> None:
    probe = (
        "import sys, agentlog, agentlog.cli, agentlog.runtime; "
        "print(any(m.split('.')[0] == 'pydantic_ai' for m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
