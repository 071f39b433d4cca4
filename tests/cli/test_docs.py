"""The docs stay inside the repository and match what the package declares."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_no_link_leaves_the_repository() -> None:
    for doc in DOCS:
        text = doc.read_text()
        for target in re.findall(r"\]\(([^)#]+)\)", text):
            if "://" not in target:
                path = (doc.parent / target).resolve()
                assert path.is_relative_to(REPO), f"{doc.name} links outside the repo: {target}"
                assert path.exists(), f"{doc.name} links to missing {target}"
        # a path into the sibling folder, written in prose rather than as a link
        assert not re.search(r"\.\./[A-Za-z]", text), f"{doc.name} points outside the repo"


def test_license_file_matches_pyproject() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text  # the full text, not a pointer


def test_readme_promises_at_least_once_not_at_most_once() -> None:
    readme = (REPO / "README.md").read_text()
    assert "at most once" not in readme and "at least once" in readme
    for command in ("archive", "sql", "--version", "python -m agentlog", "--log-format"):
        assert command in readme
