"""The SQL page's memory bound is hard: a query runs in a process of its own,
capped at its memory limit plus a fixed overhead, so the issue's query under
a 100 MB limit stops there and the server never holds its rows; a query past
its time limit has its process killed."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest
from starlette.testclient import TestClient

from agentlog.ui import create_app
from agentlog.ui._actions import CSRF_HEADER
from agentlog.ui._api_sql import SqlLimits
from tests.support.ui import Recorded
from tests.ui.test_hardening import FOREVER
from tests.ui.test_sql_limits import BOUND, Serve, token_of, wait_until

#: The issue's query: DuckDB builds 2,048 rows of 1.5 MB at a time, outside its limit.
ISSUE = "SELECT repeat('x', 1500000) AS s FROM range(1001)"
LIMIT = 100_000_000  # --sql-memory-limit 100MB


def peak_rss(pid: int) -> int:
    """The most memory the process ever held (its RSS high-water mark), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for pid {pid}")


def _cmdline(process: psutil.Process) -> list[str]:
    """A process's command line; none for one that ended (a zombie not yet reaped
    by its parent, such as a query process just killed, or a child an earlier
    test left behind)."""
    try:
        return process.cmdline()
    except psutil.NoSuchProcess:  # ZombieProcess is one
        return []


def workers(server: psutil.Process) -> list[psutil.Process]:
    return [p for p in server.children() if "agentlog.archive._sql_worker" in _cmdline(p)]


def test_the_issues_query_stops_at_its_bound_and_the_server_stays_small(serve: Serve) -> None:
    url = serve("--sql-memory-limit", "100MB", "--sql-timeout", "3600")
    (server,) = [
        p
        for p in psutil.Process().children()
        if "ui" in _cmdline(p) and "--sql-memory-limit" in _cmdline(p)
    ]
    with httpx.Client(base_url=url, timeout=BOUND) as http:
        headers = {CSRF_HEADER: token_of(http.get("/sql").text)}
        answer = http.get("/api/sql", params={"q": ISSUE}, headers=headers)
        assert answer.status_code == 400, answer.text[:300]
        error = answer.json()["error"]
        assert "limit of 100MB" in error and "--sql-memory-limit" in error, error
        said = re.search(r"may hold ([0-9,]+) bytes in all", error)
        assert said is not None, error
        bound = int(said.group(1).replace(",", ""))  # the limit, the hot events, the overhead
        assert bound > LIMIT, error
        assert workers(server), "no query process beside the server"
        peak = peak_rss(server.pid)
        assert peak < bound // 2, f"the server held {peak:,} bytes (the bound is {bound:,})"
        ok = http.get("/api/sql", params={"q": "SELECT 7"}, headers=headers)
        assert ok.status_code == 200 and ok.json()["rows"] == [[7]]
    assert peak_rss(server.pid) < bound // 2


@pytest.mark.process
def test_agentlog_sql_stops_the_issues_query_at_its_bound(recorded: Recorded) -> None:
    """The CLI and its query process, each measured by its own peak RSS."""
    measure = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=240)\n"
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "print(done.stderr)\n"
    )
    command = [sys.executable, "-c", measure, sys.executable, "-m", "agentlog", "sql", ISSUE]
    command += ["--memory-limit", "100MB", "--log", recorded.log_url]
    command += ["--archive", recorded.archive_url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=280, check=True)
    first, said = done.stdout.split("\n", 1)
    code, peak_kib = (int(x) for x in first.split())
    assert code == 2, said
    assert "limit of 100MB" in said and "--memory-limit" in said, said
    from agentlog.archive._sql_worker import query_bound

    bound = query_bound(LIMIT, psutil.cpu_count() or 1, 0)
    assert peak_kib * 1024 < bound, f"a process held {peak_kib * 1024:,} bytes, over {bound:,}"


@pytest.mark.process
def test_a_query_past_its_time_limit_has_its_process_killed(recorded: Recorded) -> None:
    from agentlog.archive._sql_process import QueryProcess, QueryProcesses

    taken: list[QueryProcess] = []

    class Recording(QueryProcesses):
        def take(self) -> QueryProcess:
            process = super().take()
            taken.append(process)
            return process

    app = create_app(recorded.log_url, recorded.archive_url, sql_limits=SqlLimits(timeout=1))
    with TestClient(app, base_url="http://127.0.0.1:8765") as http, Recording() as processes:
        app.state.sql_processes = processes
        http.headers[CSRF_HEADER] = token_of(http.get("/sql").text)
        answer = http.get("/api/sql", params={"q": FOREVER})
        assert answer.status_code == 400 and "longer than 1 s" in answer.json()["error"]
        assert len(taken) == 1
        killed = taken[0]
        wait_until(lambda: killed._proc.poll() is not None, "the query process ends")
        assert killed._proc.returncode == -signal.SIGKILL
        assert not psutil.pid_exists(killed.pid)
        again = http.get("/api/sql", params={"q": "SELECT 42"})
        assert again.status_code == 200 and again.json()["rows"] == [[42]]
        assert len(taken) == 2 and taken[1].pid != killed.pid
