"""Fixtures of the fleet suite: worker processes, the dedup service, a client runtime.

Every process a test starts is killed by a finalizer, whatever the test did.
"""

from __future__ import annotations

import asyncio
import itertools
import select
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentlog.eventlog.base import EventLog
from agentlog.eventlog.events import Event
from agentlog.eventlog.urls import open_log
from agentlog.runtime import Runtime, RuntimeConfig
from tests.crash import dedup_server
from tests.crash.worker import child_env
from tests.fleet import app

REPO = Path(__file__).resolve().parents[2]
#: How long a worker process may take to import and open its log (a hang guard).
READY_TIMEOUT_S = 60.0


@dataclass
class Dedup:
    """The dedup service: its URL, and its SQLite file to read what it saw."""

    url: str
    db: Path

    def rows(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        """Rows of a query on the service's records (read-only, as it runs)."""
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.close()


@pytest.fixture
def dedup(tmp_path: Path) -> Iterator[Dedup]:
    """A fresh dedup service in its own process (one per test, so counts are the test's)."""
    db = tmp_path / "dedup.db"
    with dedup_server.running(db) as url:
        yield Dedup(url, db)


@dataclass
class WorkerProc:
    """One ``agentlog worker`` process."""

    proc: subprocess.Popen[str]
    stderr: Path
    ready_line: str = ""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> str:
        """Block until the worker printed its ready line; return it."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        line = ""
        while not line.endswith("\n"):
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                break
            readable, _, _ = select.select([self.proc.stdout], [], [], min(left, 1.0))
            if readable:
                chunk = self.proc.stdout.readline()
                if not chunk:
                    break
                line += chunk
        assert " drives " in line, (
            f"worker {self.pid} not ready (exit {self.proc.poll()}, stdout {line!r}):\n"
            f"{self.log_tail()}"
        )
        self.ready_line = line.strip()
        return self.ready_line

    def log_tail(self, chars: int = 3000) -> str:
        return self.stderr.read_text(errors="replace")[-chars:] if self.stderr.exists() else ""

    def kill(self) -> None:
        """SIGKILL, and reap."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def terminate(self, timeout: float = 120.0) -> int:
        """SIGTERM; return the exit code once it exited (bounded by ``timeout``)."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)


@dataclass
class Fleet:
    """Starts ``agentlog worker`` processes on one log and kills them all at the end."""

    log_url: str
    dedup_url: str
    logs: Path
    lease: float = 2.0
    started: list[WorkerProc] = field(default_factory=list)
    _numbers: Iterator[int] = field(default_factory=itertools.count)  # safe across threads

    def start(
        self,
        *,
        apps: str = "tests.fleet.app:workflows",
        concurrency: int = 50,
        lease: float | None = None,
        ready: bool = True,
    ) -> WorkerProc:
        """Start one worker; by default, wait until it says it drives the log."""
        stderr = self.logs / f"worker-{next(self._numbers)}.log"
        env = {**child_env(), "FLEET_DEDUP": self.dedup_url}
        with open(stderr, "w") as err:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "agentlog",
                    "-v",
                    "worker",
                    "--app",
                    apps,
                    "--log",
                    self.log_url,
                    "--concurrency",
                    str(concurrency),
                    "--lease",
                    str(lease or self.lease),
                    "--poll",
                    "0.1",
                ],
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        worker = WorkerProc(proc, stderr)
        self.started.append(worker)
        if ready:
            worker.wait_ready()
        return worker

    @property
    def alive(self) -> list[WorkerProc]:
        return [w for w in self.started if w.proc.poll() is None]

    def close(self) -> None:
        for worker in self.started:
            if worker.proc.poll() is None:
                worker.proc.kill()
            worker.proc.wait(timeout=30)
            if worker.proc.stdout is not None:
                worker.proc.stdout.close()


@pytest.fixture
def log_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fleet.db'}"


@pytest.fixture
def worker_url(log_url: str) -> str:
    """The log URL the workers open (on Kafka: with the consumer group)."""
    return log_url


@pytest.fixture
def fleet(
    worker_url: str, dedup: Dedup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Fleet]:
    """Worker processes on the test's log; every one is killed at the end."""
    logs = tmp_path / "workers"
    logs.mkdir()
    monkeypatch.setenv("FLEET_DEDUP", dedup.url)  # tasks run in the test process too
    fleet = Fleet(worker_url, dedup.url, logs)
    try:
        yield fleet
    finally:
        fleet.close()


@pytest.fixture
async def client(log_url: str) -> AsyncIterator[Runtime]:
    """A client runtime in the test process: it records requests, never executes."""
    config = RuntimeConfig(owner="client", execute=False, worker=False)
    async with await Runtime.open(log_url, workflows=app.workflows, config=config) as rt:
        yield rt


async def until(
    check: Callable[[], Awaitable[bool]],
    what: str,
    within: float,
    every: float = 0.1,
) -> None:
    """Wait until ``check()`` is true; fail with ``what`` after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {within:g}s waiting until {what}")
        await asyncio.sleep(every)


async def history(log: EventLog, run_id: str) -> list[Event]:
    """The run's events, checked to be one contiguous seq from 1 (reading checks gaps too)."""
    events = [e async for e in log.read(run_id)]
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), f"{run_id}: seq gap"
    return events


def types(events: list[Event]) -> list[str]:
    return [e.data.type for e in events]


async def open_reader(url: str) -> EventLog:
    return await open_log(url)
