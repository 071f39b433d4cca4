"""What a trace that spans a SIGKILL and a takeover must show (the SQLite
test in tests/otel/test_crash_trace.py and the fleet one in
tests/fleet/test_otel_fleet.py check the same things).

Real processes (tests/otel/traced_worker.py) write each span they end to one
file as JSON lines. The first drives run ``r`` until its ``slow`` task runs
and is SIGKILLed there; the second takes the run over and finishes it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import TaskStarted
from tests.crash.worker import child_env

REPO_ROOT = Path(__file__).resolve().parents[2]


def spans_in(path: Path) -> list[dict[str, Any]]:
    """The spans written to ``path`` so far."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_python(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``python *args`` from the repo's root, to its end."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO_ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def check_the_takeover_trace(
    spans: Path, before: list[dict[str, Any]], second: subprocess.CompletedProcess[str], url: str
) -> None:
    """The spans are one trace across the processes, the second process's run
    span is a child of the run's start span, it recorded one takeover, and the
    task the first process died in ran again under the same idempotency key.

    Args:
        before: the spans written before the second process started.
        second: the second process, run to its end.
        url: the run's log.
    """
    assert second.returncode == 0, second.stderr[-3000:]
    ended = json.loads(second.stdout.splitlines()[-1])
    assert ended == {"status": "completed", "takeovers": 1}
    every = spans_in(spans)
    assert len({s["context"]["trace_id"] for s in every}) == 1  # one trace
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in every:
        by_name.setdefault(span["name"], []).append(span)
    (start,) = by_name["agentlog.start traced"]
    (run,) = by_name["agentlog.run traced"]  # the second process's: the first never ended
    assert run["parent_id"] == start["context"]["span_id"]
    assert run["attributes"]["agentlog.worker"] == "second"
    assert run["attributes"]["agentlog.status"] == "completed"
    (takeover,) = by_name["agentlog.takeover"]
    assert takeover["attributes"]["agentlog.worker"] == "second"
    assert takeover["attributes"]["agentlog.run_id"] == "r"
    (prepare,) = by_name["agentlog.task prepare"]  # ended in the first process, not re-run
    assert prepare in before
    (slow,) = by_name["agentlog.task slow"]  # the first process's attempt never ended
    assert slow not in before
    (step,) = by_name["agentlog.step hang"]
    assert slow["parent_id"] == step["context"]["span_id"]
    assert step["parent_id"] == run["context"]["span_id"]
    keys = asyncio.run(_slow_keys(url))
    assert len(keys) == 2  # started by the first process, again by the second
    assert set(keys) == {slow["attributes"]["agentlog.idempotency_key"]}  # one key


async def _slow_keys(url: str) -> list[str]:
    """The idempotency key of each recorded TaskStarted of the slow task."""
    log = await open_log(url)
    try:
        return [
            e.data.key
            async for e in log.read("r")
            if isinstance(e.data, TaskStarted) and e.data.name == "slow"
        ]
    finally:
        await log.close()
