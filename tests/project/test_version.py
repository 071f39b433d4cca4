"""One version: the package, pyproject, ``agentlog --version`` and CHANGELOG.md agree.

``agentlog.__version__`` is the one source: pyproject declares the version
dynamic and hatchling reads it from ``src/agentlog/__init__.py``, so a
release bumps one line and adds one CHANGELOG entry. The built wheel's own
version is checked by tests/packaging/test_install.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import agentlog

REPO = Path(__file__).resolve().parents[2]
_RELEASE = re.compile(r"^## \[(?P<version>[^\]]+)\]", re.MULTILINE)


def test_pyproject_reads_the_version_from_the_package() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    project = pyproject["project"]
    assert "version" not in project, "pyproject must not hard-code a second version"
    assert "version" in project.get("dynamic", [])
    source = REPO / pyproject["tool"]["hatch"]["version"]["path"]
    assert source == Path(agentlog.__file__).resolve()
    assert f'__version__ = "{agentlog.__version__}"' in source.read_text()


def test_changelog_latest_release_is_the_package_version() -> None:
    changelog = REPO / "CHANGELOG.md"
    assert changelog.exists(), "CHANGELOG.md is missing"
    found = _RELEASE.finditer(changelog.read_text())
    releases = [m["version"] for m in found if m["version"] != "Unreleased"]
    assert releases, "CHANGELOG.md has no '## [X.Y.Z]' release heading"
    assert releases[0] == agentlog.__version__


@pytest.mark.process
def test_cli_prints_the_package_version() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "agentlog", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert shown.stdout.strip() == f"agentlog {agentlog.__version__}"
    assert re.fullmatch(r"\d+\.\d+\.\d+", agentlog.__version__)
