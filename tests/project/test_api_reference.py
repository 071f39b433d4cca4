"""The API reference (``make docs``: scripts/api_docs.py) builds clean and is navigable.

A newcomer opens ``index.html`` and must reach every public module's page
by following links, starting from ``Runtime`` and ``Workflow``; a pdoc
warning (an annotation it cannot read, a module that does not import) fails
the build, so it fails here too.
"""

from __future__ import annotations

import importlib.util
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import agentlog

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "api_docs.py"
_HREF = re.compile(r"""(?:href=|url=)["']?([^"'#> ]+)""")


def _not_documented() -> set[str]:
    spec = importlib.util.spec_from_file_location("api_docs", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    programs = module.NOT_DOCUMENTED
    assert isinstance(programs, set)
    return programs


def _public_modules() -> set[str]:
    """``agentlog`` and each public subpackage or module of it, as page paths."""
    programs = _not_documented()
    names = {
        info.name
        for info in pkgutil.iter_modules(agentlog.__path__)
        if not info.name.startswith("_") and info.name not in programs
    }
    return {"agentlog.html"} | {f"agentlog/{name}.html" for name in names}


def _reachable(root: Path) -> set[str]:
    """Every page under ``root`` reached by links from ``index.html``."""
    seen: set[str] = set()
    todo = ["index.html"]
    while todo:
        page = todo.pop()
        if page in seen:
            continue
        seen.add(page)
        text = (root / page).read_text()
        for target in _HREF.findall(text):
            if "://" in target or not target.endswith(".html"):
                continue
            resolved = (root / page).parent.joinpath(target).resolve()
            if resolved.is_relative_to(root) and resolved.exists():
                todo.append(resolved.relative_to(root).as_posix())
    return seen


@pytest.mark.process
def test_api_reference_builds_without_warnings_and_links_every_public_module(
    tmp_path: Path,
) -> None:
    out = tmp_path / "api"
    built = subprocess.run(
        [sys.executable, str(SCRIPT), str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert built.returncode == 0 and "warning" not in built.stderr.lower(), (
        f"the API reference must build without warnings:\n{built.stderr}"
    )

    root = out.resolve()
    reachable = _reachable(root)
    missing = sorted(_public_modules() - reachable)
    assert not missing, f"public modules with no page reachable from index.html: {missing}"
    orphans = sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*.html")
        if p.relative_to(root).as_posix() not in reachable
    )
    assert not orphans, f"pages no link reaches from index.html: {orphans}"

    landing = (root / "agentlog.html").read_text()
    for name in ("Runtime", "Workflow"):
        assert f'href="agentlog/runtime.html#{name}"' in landing, (
            f"the landing page must link {name} (agentlog/runtime.html#{name})"
        )
