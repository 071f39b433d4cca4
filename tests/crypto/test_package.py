"""agentlog.crypto sits below every layer and exports a pinned set of names."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import agentlog.crypto

ROOT = Path(agentlog.crypto.__file__).parent


def test_crypto_imports_only_errors_and_the_logger() -> None:
    for path in ROOT.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                if name.startswith("agentlog."):
                    assert name.split(".")[1] in ("crypto", "errors", "_logging", "_renamed"), (
                        path,
                        name,
                    )


@pytest.mark.process
def test_importing_it_does_not_import_boto3() -> None:
    code = "import sys, agentlog.crypto; print('boto3' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
