"""The fleet tests' helpers: worker processes, the dedup service's records, waiting.

Every process a :class:`Fleet` starts is killed by :meth:`Fleet.close`, which
the ``fleet`` fixture (tests/fleet/conftest.py) calls whatever the test did.
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
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentlog.errors import LeaseHeldError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import Event
from agentlog.runtime import Runtime
from tests.crash.worker import child_env

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


async def resume_when_free(rt: Runtime, run_id: str, value: Any, within: float = 120.0) -> None:
    """``rt.resume(run_id, value)``, again while a writer still holds the run: a
    worker that parked it lets go just after the run reads ``waiting``, and a
    killed one holds it until its lease runs out (LeaseHeldError says how long)."""
    deadline = time.monotonic() + within
    while True:
        try:
            await rt.resume(run_id, value)
            return
        except LeaseHeldError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def history(log: EventLog, run_id: str) -> list[Event]:
    """The run's events, checked to be one contiguous seq from 1 (reading checks gaps too)."""
    events = [e async for e in log.read(run_id)]
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), f"{run_id}: seq gap"
    return events


def types(events: list[Event]) -> list[str]:
    return [e.data.type for e in events]


async def open_reader(url: str) -> EventLog:
    return await open_log(url)
