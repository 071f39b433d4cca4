"""Worker processes and the client side of the worker benchmarks.

:class:`Fleet` starts real ``agentlog worker --app benchmarks.fleet_app:workflows``
processes on one log and stops every one of them; the helpers submit runs as
a client (``Runtime(execute=False, worker=False)``), hold runs back until an
instant, and read runs back. Backend-agnostic: a log URL is all they take.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import agentlog
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import Event, utcnow
from agentlog.runtime import Runtime, RuntimeConfig
from benchmarks import fleet_app

__all__ = [
    "CONCURRENCY",
    "GATE_OWNER",
    "POLL_S",
    "Fleet",
    "open_client",
    "count",
    "fleet",
    "history",
    "hold_until",
    "sleep_until",
    "submit_all",
    "wait_for",
]

REPO = Path(__file__).resolve().parent.parent
APP = "benchmarks.fleet_app:workflows"
CONCURRENCY = 50
POLL_S = 0.2
GATE_OWNER = "bench-gate"


# -- worker processes ---------------------------------------------------------------


class Fleet:
    """``agentlog worker`` processes on one log; :meth:`close` stops every one.

    ``command`` is what follows the interpreter, before ``--log URL`` and the
    worker options: ``agentlog worker`` by default; the Kafka benchmark's
    probe worker (``benchmarks/probe_worker.py``) takes the same options.
    """

    def __init__(
        self,
        url: str,
        folder: Path,
        *,
        concurrency: int = CONCURRENCY,
        lease_s: float = 30.0,
        poll_s: float = POLL_S,
        env: dict[str, str] | None = None,
        command: Sequence[str] = ("-m", "agentlog", "worker", "--app", APP),
    ) -> None:
        self.url, self.folder, self.command = url, folder, list(command)
        self.args = ["--concurrency", str(concurrency), "--lease", str(lease_s)]
        self.args += ["--poll", str(poll_s)]
        # The agentlog this process imported, and the repo for benchmarks.fleet_app.
        src = str(Path(agentlog.__file__).resolve().parent.parent)
        path = os.pathsep.join(p for p in (src, str(REPO), os.environ.get("PYTHONPATH")) if p)
        self.env = {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, count: int) -> list[subprocess.Popen[bytes]]:
        """Start ``count`` workers (not waiting for them; see :meth:`wait_ready`)."""
        started = []
        for _ in range(count):
            index = len(self.procs)
            out = open(self.folder / f"worker-{index}.out", "wb")  # noqa: SIM115 - the child's
            err = open(self.folder / f"worker-{index}.err", "wb")  # noqa: SIM115
            cmd = [sys.executable, *self.command, "--log", self.url]
            proc = subprocess.Popen(
                [*cmd, *self.args], cwd=REPO, env=self.env, stdout=out, stderr=err
            )
            out.close()
            err.close()
            self.procs.append(proc)
            started.append(proc)
        return started

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Wait until every worker printed its first line (it is about to poll)."""
        deadline = time.monotonic() + timeout_s
        for index, proc in enumerate(self.procs):
            out = self.folder / f"worker-{index}.out"
            while b" drives " not in out.read_bytes():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"worker {index} did not start: {self.stderr(index)}")
                time.sleep(0.05)

    def stderr(self, index: int) -> str:
        """The tail of worker ``index``'s stderr, for an error message."""
        return (self.folder / f"worker-{index}.err").read_text(errors="replace")[-2000:]

    @staticmethod
    def owner(proc: subprocess.Popen[bytes]) -> str:
        """The owner a worker writes in the run index (RuntimeConfig's default)."""
        return f"{socket.gethostname()}:{proc.pid}"

    @staticmethod
    def kill(proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL one worker and reap it."""
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    def close(self, grace_s: float = 20.0) -> None:
        """SIGTERM every live worker (runs are handed over), SIGKILL any that
        is still alive after ``grace_s``, and reap them all."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)


@contextmanager
def fleet(url: str, folder: Path, **kwargs: Any) -> Iterator[Fleet]:
    """A :class:`Fleet` that is closed however the block ends."""
    workers = Fleet(url, folder, **kwargs)
    try:
        yield workers
    finally:
        workers.close()


# -- the client side ------------------------------------------------------------------


async def open_client(url: str) -> Runtime:
    """A runtime that only records requests; workers drive the runs."""
    config = RuntimeConfig(execute=False, worker=False)
    return await Runtime.open(url, workflows=fleet_app.workflows, config=config)


async def submit_all(
    runtime: Runtime,
    workflow: str,
    inputs: Sequence[tuple[str, dict[str, Any]]],
    parallel: int = 32,
) -> float:
    """Submit every ``(run_id, input)``, ``parallel`` at a time; return the seconds it took."""
    gate = asyncio.Semaphore(parallel)

    async def one(run_id: str, run_input: dict[str, Any]) -> None:
        async with gate:
            await runtime.submit(workflow, run_id=run_id, input=run_input)

    started = time.perf_counter()
    await asyncio.gather(*(one(run_id, data) for run_id, data in inputs))
    return time.perf_counter() - started


async def hold_until(log: EventLog, run_ids: Sequence[str], until: datetime) -> None:
    """Claim every run with a lease that ends at ``until``, so that no worker
    takes any of them before that instant (a writer that claimed and left)."""
    for run_id in run_ids:
        left = (until - utcnow()).total_seconds()
        if left < 1.0:
            raise RuntimeError(f"the gate at {until} came before every run was held; widen it")
        await log.claim_writer(run_id, owner=GATE_OWNER, lease_seconds=left, force=False)


async def wait_for(
    check: Callable[[], Awaitable[bool]], timeout_s: float, what: str, every_s: float = 0.5
) -> float:
    """Poll ``check`` until it is true; return the seconds waited. Raises after ``timeout_s``."""
    started = time.monotonic()
    while not await check():
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"gave up after {timeout_s:.0f}s waiting for {what}")
        await asyncio.sleep(every_s)
    return time.monotonic() - started


async def count(log: EventLog, status: str) -> int:
    """How many runs have ``status`` now."""
    return len(await log.list_runs(status=status))


async def history(log: EventLog, run_id: str) -> list[Event]:
    """Every event of one run."""
    return [event async for event in log.read(run_id)]


async def sleep_until(moment: datetime) -> None:
    """Sleep until the UTC instant ``moment``."""
    await asyncio.sleep(max(0.0, (moment - utcnow()).total_seconds()))
