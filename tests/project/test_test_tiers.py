"""The test tree's own structure: helpers in tests/support, and the tiers.

A conftest holds fixtures and hooks; whatever a test module imports lives in
the ``tests.support`` package. The tiers (tests/support/tiers.py) mark a
test from the fixtures it uses, so a new test cannot forget its marker, and
the unit tier refuses to start a process.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]


def _imported_modules(path: Path) -> list[str]:
    """Every module ``path`` imports, as written (relative ones with their dots)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            found += [base] if node.module else [f"{base}{a.name}" for a in node.names]
    return found


def test_no_test_module_imports_from_a_conftest() -> None:
    offenders = [
        f"{path.relative_to(TESTS.parent)}: {module}"
        for path in sorted(TESTS.rglob("*.py"))
        for module in _imported_modules(path)
        if module.rsplit(".", 1)[-1] == "conftest"
    ]
    assert not offenders, (
        "these import from a conftest; move what they import to tests/support/:\n"
        + "\n".join(offenders)
    )


def test_shared_helpers_live_in_tests_support() -> None:
    loose = sorted(
        path.name for path in TESTS.glob("*.py") if path.name not in ("__init__.py", "conftest.py")
    )
    assert not loose, f"helper modules at the top of tests/ belong in tests/support/: {loose}"


TIERED = """
import subprocess

import pytest


@pytest.fixture
def postgres_server():
    return "postgres"


@pytest.fixture
def postgres_url(postgres_server):
    return postgres_server


@pytest.fixture
def serve():
    return "a server process"


def test_plain():
    pass


def test_on_postgres(postgres_url):
    pass


def test_behind_a_server(serve):
    pass


@pytest.mark.fleet
def test_fleet():
    pass


@pytest.mark.slow
def test_slow():
    pass


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def test_backend(backend):
    pass
"""


def _project(pytester: pytest.Pytester, **files: str) -> None:
    """A project in ``pytester``'s folder with the real markers and ``files``."""
    pyproject = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())
    markers = pyproject["tool"]["pytest"]["ini_options"]["markers"]
    pytester.makeini(
        "[pytest]\naddopts = --strict-markers\nasyncio_default_fixture_loop_scope = function\n"
        "markers =\n" + "".join(f"    {m}\n" for m in markers)
    )
    pytester.makepyfile(**files)


def _collected(pytester: pytest.Pytester, tier: str) -> set[str]:
    _project(pytester, test_tiered=TIERED)
    result = pytester.runpytest_inprocess(
        "-p", "tests.support.tiers", "--tier", tier, "--collect-only", "-q"
    )
    return {line.split("::", 1)[1] for line in result.outlines if "::" in line}


def test_the_unit_tier_leaves_out_services_processes_and_slow_tests(
    pytester: pytest.Pytester,
) -> None:
    assert _collected(pytester, "unit") == {"test_plain", "test_backend[sqlite]"}


def test_the_fast_tier_leaves_out_services_and_slow_tests(pytester: pytest.Pytester) -> None:
    assert _collected(pytester, "fast") == {
        "test_plain",
        "test_behind_a_server",
        "test_fleet",
        "test_backend[sqlite]",
    }


def test_the_whole_suite_is_every_test(pytester: pytest.Pytester) -> None:
    assert len(_collected(pytester, "all")) == 7


def test_markers_come_from_the_fixtures_a_test_uses(pytester: pytest.Pytester) -> None:
    _project(pytester, test_tiered=TIERED)
    result = pytester.runpytest_inprocess(
        "-p", "tests.support.tiers", "-m", "postgres and service", "--collect-only", "-q"
    )
    assert [line for line in result.outlines if "::" in line] == [
        "test_tiered.py::test_on_postgres"
    ]


def test_the_unit_tier_fails_a_test_that_starts_a_process(pytester: pytest.Pytester) -> None:
    _project(
        pytester,
        test_spawns="""
        import subprocess
        import sys

        def test_starts():
            subprocess.run([sys.executable, "-c", "pass"], check=True)

        def test_starts_and_swallows():
            try:
                subprocess.run([sys.executable, "-c", "pass"], check=True)
            except Exception:
                pass
        """,
    )
    result = pytester.runpytest_inprocess("-p", "tests.support.tiers", "--tier", "unit")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_starts started a process (_execute_child*) in the unit tier*",
            "*test_starts_and_swallows started a process in the unit tier*and caught the error*",
        ]
    )
