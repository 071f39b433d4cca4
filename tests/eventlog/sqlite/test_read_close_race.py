"""A read on one thread racing another thread's ``close()`` of a SQLite log.

The small reads run on the caller's thread, from read-only connections
(``eventlog/sqlite/_reader.py``): an ``AgentlogSaver``'s ``get_tuple``
served on LangGraph's thread, a second event loop's reads. ``close()`` used
to close every read connection, including one another thread was executing
a statement on, and CPython's sqlite3 (3.11) then crashes the process with a
segfault (a review of session 34: 15 of 15 processes). Now close() leaves a
busy connection to its read, which closes it when it ends; a read after the
close raises the log's closed error.

Each case runs in a child process, so that a crash is a failed test and not
the end of the test run. In the first the read is a statement that runs for
about a second; close() is called once the read holds its connection (polled
for, with a generous bound) and a short while into the statement. In the
second a thread reads in a loop while the log is closed at a varying point,
``_ROUNDS`` times (the code before the fix crashed there).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.crash.worker import child_env

_GENEROUS = 120.0
_ROUNDS = 150

_CHILD = r"""
import asyncio, json, sys, threading, time
from agentlog.errors import BackendUnavailableError
from agentlog.eventlog._urls import open_sqlite_log

path, how = sys.argv[1], sys.argv[2]
if how == "many":  # short reads in a loop, closed at a varying point, ROUNDS times
    import random
    shapes = random.Random(34)
    seen = set()
    for _ in range(int(sys.argv[3])):
        log = open_sqlite_log(f"sqlite:///{path}")
        def reads_until_closed():
            try:
                while True:
                    log._reads.query_pooled("SELECT count(*) FROM runs WHERE run_id > ?", ("",))
            except BackendUnavailableError as exc:
                seen.add((exc.retryable, "closed" in str(exc)))
        thread = threading.Thread(target=reads_until_closed)
        thread.start()
        time.sleep(shapes.random() * 0.002)
        asyncio.run(log.close())
        thread.join(60)
        assert not thread.is_alive()
    print(json.dumps({"errors": sorted(seen)}))
    sys.exit(0)
log = open_sqlite_log(f"sqlite:///{path}")
reads = log._reads
slow = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000) "
        "SELECT count(*) FROM c")
out = {}

def read():
    try:
        rows = reads.query_pooled(slow, ()) if how == "pooled" else reads.query(slow, ())
        out["read"] = rows[0][0]
    except BackendUnavailableError as exc:
        out["read"] = f"closed: {exc}"

thread = threading.Thread(target=read)
thread.start()
deadline = time.monotonic() + 60
while not reads._busy and thread.is_alive() and time.monotonic() < deadline:
    time.sleep(0.001)
out["busy_at_close"] = bool(reads._busy)
time.sleep(0.05)  # into the statement (its outcome is checked either way)
asyncio.run(log.close())
thread.join(60)
out["joined"] = not thread.is_alive()
out["left_open"] = len(reads._opened)
try:
    reads.query_pooled("SELECT 1", ())
    out["after"] = "read a closed log"
except BackendUnavailableError as exc:
    out["after"] = {"retryable": exc.retryable, "message": str(exc)}
print(json.dumps(out))
"""


def _child(tmp_path: Path, *args: str) -> dict[str, Any]:
    """Run the race in a child process; what it printed (a crash fails here)."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "race.db"), *args],
        capture_output=True,
        text=True,
        timeout=_GENEROUS,
        env=child_env(),
    )
    assert done.returncode == 0, f"the reading process died ({done.returncode}): {done.stderr}"
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("how", ["pooled", "own"], ids=["pooled-connection", "threads-own"])
def test_a_read_running_as_another_thread_closes_the_log_ends_cleanly(
    tmp_path: Path, how: str
) -> None:
    out = _child(tmp_path, how)
    assert out["joined"], out
    assert out["busy_at_close"], out  # the read held its connection when close() ran
    assert out["read"] == 2_000_000, out  # a read under way when close() ran finishes
    assert out["left_open"] == 0, out  # the read closed its connection
    assert out["after"]["retryable"] is False, out
    assert "closed" in out["after"]["message"], out


def test_reads_in_a_loop_as_another_thread_closes_the_log_never_crash(tmp_path: Path) -> None:
    out = _child(tmp_path, "many", str(_ROUNDS))
    # Every read that lost the race said the log is closed, and not to retry.
    assert out["errors"] == [[False, True]], out
