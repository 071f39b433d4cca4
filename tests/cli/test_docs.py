"""The docs stay inside the repository and match what the package declares.

README.md is a page a newcomer reads in five minutes: it opens with the two
commands a fresh clone runs (the demo and the tests, the second being what
CI runs), then what agentlog is, one example (run here), the backends, how
to install, and where to go next. The reference lives in docs/, one page
per concept, every page linked from docs/README.md.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = [README, *sorted((REPO / "docs").glob("*.md"))]
_LINK = re.compile(r"\]\(([^)#]+)(?:#[^)]*)?\)")


def _links(doc: Path) -> set[Path]:
    """The files under the repository that ``doc`` links to."""
    return {
        (doc.parent / target).resolve()
        for target in _LINK.findall(doc.read_text())
        if "://" not in target
    }


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.DOTALL)


def test_no_link_leaves_the_repository() -> None:
    for doc in DOCS:
        text = doc.read_text()
        for path in _links(doc):
            assert path.is_relative_to(REPO), f"{doc.name} links outside the repo: {path}"
            assert path.exists(), f"{doc.name} links to missing {path}"
        # a path into the sibling folder, written in prose rather than as a link
        prose = _LINK.sub("]", text)
        assert not re.search(r"\.\./[A-Za-z]", prose), f"{doc.name} points outside the repo"


def test_license_file_matches_pyproject() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text  # the full text, not a pointer


def test_docs_promise_at_least_once_not_at_most_once() -> None:
    for doc in DOCS:
        assert "at most once" not in doc.read_text(), doc.name
    assert "at least once" in README.read_text()
    cli = (REPO / "docs" / "cli.md").read_text()
    for command in ("archive", "sql", "--version", "python -m agentlog", "--log-format"):
        assert command in cli


def test_readme_opens_with_the_demo_and_the_test_command_ci_runs() -> None:
    text = README.read_text()
    first = _blocks(text, "sh")[0]
    assert text.index(first) < text.index("\n## "), "the two commands come before any section"
    commands = [line.split("#")[0].strip() for line in first.strip().splitlines()]
    assert commands == ["make demo", "make test"]
    makefile = (REPO / "Makefile").read_text()
    for command in commands:
        assert re.search(rf"^{command.split()[1]}:", makefile, re.MULTILINE), command
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    assert commands[1] in ci, ".ci/run must run the README's test command"


def test_readme_is_a_short_page_in_order() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 150, "README.md is a five-minute page: reference goes in docs/"
    sections = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert sections == [
        "What it is",
        "Example",
        "Backends",
        "Multi-agent runs",
        "Integrations",
        "Install",
        "Where to go next",
    ]
    assert len(_blocks(text, "python")) == 1
    assert "| SQLite (the default) |" in text


def test_readme_says_how_to_install_from_the_clone() -> None:
    text = README.read_text()
    for command in ("pip install .", 'pip install ".[langgraph]"', "python -m build"):
        assert command in text, command
    for doc in DOCS:  # the package is not on PyPI yet: no doc may say to install it from there
        assert not re.search(r"pip install ['\"]?agentlog\[", doc.read_text()), doc.name


def test_docs_index_links_every_docs_page() -> None:
    index = REPO / "docs" / "README.md"
    assert index.resolve() in _links(README)
    linked = _links(index)
    pages = {p.resolve() for p in (REPO / "docs").glob("*.md")} - {index.resolve()}
    missing = sorted(p.name for p in pages - linked)
    assert not missing, f"docs/README.md does not link: {missing}"


@pytest.mark.process
def test_readme_example_runs(tmp_path: Path) -> None:
    """The README's example, run as written inside an async main, in an empty folder."""
    (code,) = _blocks(README.read_text(), "python")
    head, found, tail = code.partition("async with")
    assert found, "the example opens a Runtime with `async with`"
    body = "\n".join("    " + line for line in (found + tail).splitlines())
    script = f"import asyncio\n{head}\nasync def main():\n{body}\n\nasyncio.run(main())\n"
    (tmp_path / "example.py").write_text(script)
    done = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    assert "'reply': 'About refund: ...'" in done.stdout, done.stdout
