"""The layers import one way, and the optional extras stay optional.

What each public module exports is pinned in test_public_names.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import agentlog
import agentlog.cli
import agentlog.eventlog
import agentlog.eventlog.kafka
import agentlog.projector
import agentlog.runtime


def test_layers_import_one_way() -> None:
    """crypto imports no other layer; eventlog only crypto; projector only those two."""
    root = Path(agentlog.__file__).parent
    allowed = {
        # Encryption sits at the bottom: the log seals with it, it knows no log.
        "crypto": {"crypto"},
        "eventlog": {"crypto", "eventlog"},
        "projector": {"crypto", "eventlog", "projector"},
        "runtime": {"crypto", "eventlog", "projector", "runtime"},
        "archive": {"crypto", "eventlog", "projector", "archive"},
        # The LangGraph saver sits on top, beside the CLI: nothing imports it.
        "langgraph": {"crypto", "eventlog", "projector", "runtime", "langgraph"},
        # The agent-framework integrations too, each on the runtime's public face.
        "openai_agents": {"crypto", "eventlog", "projector", "runtime", "openai_agents"},
        "pydantic_ai": {"crypto", "eventlog", "projector", "runtime", "pydantic_ai"},
        # OpenTelemetry: the runtime's telemetry hooks on its API (the runtime loads it by name).
        "otel": {"crypto", "eventlog", "projector", "runtime", "otel"},
        # The replay debugger's data layer and the replay check: under the CLI and the UI.
        "replay": {"crypto", "eventlog", "projector", "runtime", "archive", "replay"},
    }
    # A runtime reads runs archived and pruned from its log (start, wait, fork):
    # one runtime module reads the archive (lazily, and the archive imports no
    # runtime: no cycle).
    reads_archive = {Path("runtime/_archived.py")}
    for layer, ok in allowed.items():
        for path in (root / layer).rglob("*.py"):  # a layer not built yet has no files
            also = {"archive"} if path.relative_to(root) in reads_archive else set()
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("agentlog."):
                    target = node.module.split(".")[1]  # type: ignore[union-attr]
                    if target in allowed:
                        assert target in ok | also, (
                            f"{path.relative_to(root)} imports agentlog.{target}"
                        )


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_presentation_sits_at_the_top() -> None:
    """Typer and Rich live only in cli/ (and the demo); no component imports the CLI."""
    root = Path(agentlog.__file__).parent
    for layer in ("eventlog", "projector", "runtime", "archive", "langgraph", "replay"):
        for path in (root / layer).rglob("*.py"):  # a layer not built yet has no files
            for name in _imports(path):
                top = name.split(".")[0]
                where = path.relative_to(root)
                assert top not in ("typer", "rich"), f"{where} imports {name}"
                assert not name.startswith("agentlog.cli"), f"{where} imports {name}"


def test_kafka_modules_import_each_other_not_the_package() -> None:
    """No import runs back up: eventlog/kafka's modules never import the package
    __init__ (which imports them), nor any layer above eventlog."""
    root = Path(agentlog.eventlog.kafka.__file__).parent
    for path in root.glob("*.py"):
        if path.name == "__init__.py":
            continue
        for name in _imports(path):
            assert name != "agentlog.eventlog.kafka", f"{path.name} imports its own package"
            parts = name.split(".")
            if parts[0] == "agentlog" and len(parts) > 1:
                assert parts[1] not in ("runtime", "projector", "archive", "cli", "ui"), (
                    f"{path.name} imports {name}"
                )


#: Each optional integration: its package under agentlog, and the top-level
#: module of the framework it wraps.
INTEGRATIONS = [
    ("langgraph", "langgraph"),
    ("pydantic_ai", "pydantic_ai"),
    ("openai_agents", "agents"),
    ("otel", "opentelemetry"),
]


@pytest.mark.process
@pytest.mark.parametrize(("package", "framework"), INTEGRATIONS)
def test_nothing_imports_an_integration(package: str, framework: str) -> None:
    """An integration is an optional extra: no other module imports it or its
    framework, and `import agentlog` (the CLI and the runtime too) loads
    neither, so agentlog works without the framework installed."""
    import subprocess
    import sys

    root = Path(agentlog.__file__).parent
    for path in root.rglob("*.py"):
        if path.is_relative_to(root / package):
            continue
        for name in _imports(path):
            where = path.relative_to(root)
            assert name.split(".")[0] != framework, f"{where}: {name}"
            assert not name.startswith(f"agentlog.{package}"), f"{where}: {name}"
    probe = (
        "import sys, agentlog, agentlog.cli, agentlog.runtime; "
        f"print(any(m.split('.')[0] == {framework!r} for m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
