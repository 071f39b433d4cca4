"""The import graph of src/agentlog has no cycle and no arrow up a layer.

Every import counts: at module level, inside a function, and under
``TYPE_CHECKING`` (a type-only import of a higher module is still a module
that knows the one above it). The layers are docs/architecture.md's, bottom
first; a package imports only from its own layer's package or from layers
beneath it, and two packages of one layer never import each other. There are
no exceptions: a new import that needs one is a design question, not a line
to add here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import agentlog

_ROOT = Path(agentlog.__file__).parent

#: Bottom first. A name is a top-level package or module of agentlog;
#: "agentlog" is the package's own ``__init__`` (``import agentlog``).
_LAYERS: list[set[str]] = [
    {"errors"},  # the one exception root
    {"_logging", "_files", "_renamed"},  # structlog's setup; file modes; old names kept
    {"crypto"},  # data keys and sealing: knows no log
    {"eventlog"},  # events, the EventLog seam, the backends
    {"agentlog"},  # `import agentlog`: Event, EventLog, open_log, errors
    {"projector", "testing"},  # fold and snapshots; the shipped contract suite
    {"archive"},  # Parquet and DuckDB; the runtime reads archived runs through it
    {"runtime"},  # workflows, the executor, the driver, requests, worker, Runtime
    {"replay"},  # the debugger's data and the replay check (drives the executor)
    {"ui", "langgraph", "openai_agents", "pydantic_ai", "otel"},  # the web debugger; the
    # integrations (the LangGraph saver, the OpenAI Agents SDK, Pydantic AI and OpenTelemetry:
    # nothing imports them; the runtime loads agentlog.otel by name, runtime/_telemetry.py)
    {"cli"},  # the command (Typer and Rich), the demo included
    {"__main__", "demo"},  # `python -m agentlog`; the demo's former import path
]


def _modules() -> dict[str, Path]:
    found = {}
    for path in _ROOT.rglob("*.py"):
        parts = ["agentlog", *path.relative_to(_ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The agentlog modules ``module`` imports, wherever the import stands."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from package import module` imports the module; `from m import name`, m.
            names += [
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            ]
    found = set()
    for name in names:
        while name not in modules and "." in name:
            name = name.rsplit(".", 1)[0]
        if name in modules and name.startswith("agentlog") and name != module:
            found.add(name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {module: _imports(module, path, modules) for module, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _layer_of(module: str) -> int:
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else "agentlog"
    for rank, layer in enumerate(_LAYERS):
        if name in layer:
            return rank
    raise AssertionError(
        f"{module} belongs to no layer: place agentlog.{name} in _LAYERS "
        "(and in docs/architecture.md's layer table)"
    )


def test_the_graph_is_read_whole() -> None:
    """The reading sees every kind of import (a test of the test): a
    function-level one, a TYPE_CHECKING one and a relative one."""
    graph = _graph()
    assert len(graph) > 100
    assert "agentlog.runtime._driver" in graph["agentlog.runtime._commands"]  # module level
    assert "agentlog.cli._demo" in graph["agentlog.cli._control"]  # inside a function
    assert "agentlog.eventlog.kafka._config" in graph["agentlog.eventlog._urls"]  # TYPE_CHECKING
    assert "agentlog.eventlog" in graph["agentlog"]


def test_the_import_graph_has_no_cycle() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "import cycles (break each; see docs/architecture.md): " + "; ".join(
        " <-> ".join(cycle) for cycle in cycles
    )


def test_no_import_points_up_a_layer() -> None:
    wrong = []
    for module, targets in sorted(_graph().items()):
        for target in sorted(targets):
            here, there = _layer_of(module), _layer_of(target)
            same_package = module.split(".")[:2] == target.split(".")[:2]
            if there > here or (there == here and not same_package):
                wrong.append(f"{module} -> {target}")
    assert not wrong, "imports up a layer (or across one): " + ", ".join(wrong)
