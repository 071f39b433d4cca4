"""Pytest plugin: the test tiers, and the markers they select on.

A test is marked by what it needs, so that a tier can leave it out:

- a service: ``postgres``, ``redis``, ``kafka``, ``s3`` (moto_server),
  ``chromium`` (a headless browser). Every one of them also gets ``service``.
- ``process``: it starts a child process (a worker, the UI server, a script).
- ``slow``: it takes over about 10 s on the shared 2-core CI machine
  (``--durations``); marked by hand, where it is measured.

The service and process markers are added here from the fixtures a test
uses (:data:`FIXTURE_MARKS`), so a new test that asks for ``postgres_url``
cannot forget its marker. A test that starts a process in its own body is
marked by hand; the unit tier catches one that was not (below).

``--tier`` picks a tier (``make test-unit``, ``make test-fast``):

- ``unit``: memory and SQLite only; no service, no process, nothing slow.
  Starting a process there fails the test that did it, with the marker to add.
- ``fast``: no service and nothing slow; processes are allowed.
- ``all`` (the default, ``make test``): every test.
"""

from __future__ import annotations

import multiprocessing.util
import os
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest

#: The markers of the services a test may need; each implies ``service``.
SERVICES = ("postgres", "redis", "kafka", "s3", "chromium")

#: Fixtures that bring a service or start a process, and the markers they imply.
FIXTURE_MARKS: dict[str, tuple[str, ...]] = {
    "postgres_server": ("postgres",),
    "own_server": ("postgres",),
    "redis_server": ("redis",),
    "redis_volatile": ("redis",),
    "kafka_bootstrap": ("kafka",),
    "kafka_sasl": ("kafka",),
    "s3_endpoint": ("s3",),
    "browser": ("chromium", "process"),
    "serve": ("process",),
    "dedup_url": ("process",),
    "dedup": ("process",),
    "fleet": ("process",),
}

#: Markers set by hand that imply a child process.
PROCESS_MARKS = ("crash", "fleet", "package")

#: Tests of the shipped contract suite (``agentlog.testing``) that start processes
#: when the backend's ``log_url`` fixture names a URL; code outside tests/ carries
#: no marker of this tree, so they are named here.
CONTRACT_PROCESS_TESTS = frozenset({"test_racing_writers_leave_one_gapless_history"})

#: What each tier leaves out (a test with any of these markers).
TIER_EXCLUDES: dict[str, tuple[str, ...]] = {
    "unit": ("service", "process", "slow"),
    "fast": ("service", "slow"),
    "all": (),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tier",
        choices=sorted(TIER_EXCLUDES),
        default="all",
        help="unit: memory and SQLite, no service, no process, nothing slow; "
        "fast: no service and nothing slow; all: every test (default)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """The unit tier guards against processes (the markers are in pyproject.toml)."""
    if config.getoption("tier") == "unit":
        config.pluginmanager.register(_ProcessGuard(), "agentlog-process-guard")


def marks_of(item: pytest.Item) -> set[str]:
    """The tier markers ``item`` gets from its fixtures and its own marks."""
    names = {mark.name for mark in item.iter_markers()}
    if getattr(item, "originalname", item.name) in CONTRACT_PROCESS_TESTS:
        names.add("process")
    for fixture in getattr(item, "fixturenames", ()):
        names.update(FIXTURE_MARKS.get(fixture, ()))
    if names.intersection(SERVICES):
        names.add("service")
    if names.intersection(PROCESS_MARKS):
        names.add("process")
    return names


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test from its fixtures, then leave out what ``--tier`` excludes."""
    excluded = set(TIER_EXCLUDES[config.getoption("tier")])
    kept, dropped = [], []
    for item in items:
        names = marks_of(item)
        for name in sorted(names - {mark.name for mark in item.iter_markers()}):
            item.add_marker(name)
        (dropped if names & excluded else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


class ProcessStartedError(RuntimeError):
    """A test of the unit tier started a child process."""


class _ProcessGuard:
    """Fails any test of the unit tier that starts a process, naming the marker to add.

    The ways a process starts are patched for the session: ``subprocess``
    (and asyncio's subprocesses, built on it), ``os.fork``, ``os.posix_spawn``
    and multiprocessing's spawn. A test that catches the error still fails:
    what it tried is recorded and reported when the test ends.
    """

    def __init__(self) -> None:
        self.item: pytest.Item | None = None
        self.tried: list[str] = []
        self._undo: list[Callable[[], None]] = []

    def _patch(self, owner: Any, name: str) -> None:
        original = getattr(owner, name)

        def refuse(*args: Any, **kwargs: Any) -> Any:
            what = f"{name}{_argv(args)}"
            self.tried.append(what)
            where = self.item.nodeid if self.item is not None else "a unit-tier test"
            raise ProcessStartedError(
                f"{where} started a process ({what}) in the unit tier, which starts none: "
                "mark the test `@pytest.mark.process` (or use a fixture that implies it)"
            )

        setattr(owner, name, refuse)
        self._undo.append(lambda: setattr(owner, name, original))

    @pytest.hookimpl
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self._patch(subprocess.Popen, "_execute_child")
        self._patch(os, "fork")
        for name in ("posix_spawn", "posix_spawnp"):
            if hasattr(os, name):
                self._patch(os, name)
        self._patch(multiprocessing.util, "spawnv_passfds")

    @pytest.hookimpl
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        while self._undo:
            self._undo.pop()()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        self.item, self.tried = item, []
        try:
            return (yield)
        finally:
            self.item = None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Iterator[pytest.TestReport]:
        report: pytest.TestReport = yield
        if report.when == "call" and self.tried and report.passed:
            report.outcome = "failed"
            report.longrepr = (
                f"{item.nodeid} started a process in the unit tier ({', '.join(self.tried)}) "
                "and caught the error: mark it `@pytest.mark.process`"
            )
        return report


def _argv(args: tuple[Any, ...]) -> str:
    """A short view of what the process was to run, for the message."""
    if args and isinstance(args[0], subprocess.Popen):
        argv = args[1] if len(args) > 1 else args[0].args
        return f": {argv!r}"[:200]
    return ""
