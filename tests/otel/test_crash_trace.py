"""A run's trace spans a SIGKILL and a takeover by another process.

Two real processes share one SQLite file (tests/otel/traced_worker.py). The
first starts a run and is SIGKILLed while the run's ``slow`` task runs; the
second, a worker, takes the run over once the dead writer's lease ran out and
finishes it. Both write every span they end to one file as JSON lines. The
spans of both processes are one trace: the second's run span is a child of
the run's start span (its traceparent is stored in the run's RunStarted), it
records a takeover, and the task the first process died in runs again under
the same idempotency key.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import TaskStarted
from tests.crash.worker import child_env, kill, spawn_ready

pytestmark = pytest.mark.process

REPO_ROOT = Path(__file__).resolve().parents[2]


def _spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_trace_spans_a_sigkill_and_a_takeover(tmp_path: Path) -> None:
    url, spans = f"sqlite:///{tmp_path / 'log.db'}", tmp_path / "spans.jsonl"
    worker = ["-m", "tests.otel.traced_worker", url, str(spans)]
    first = spawn_ready([*worker, "first"], tmp_path / "first.log")
    try:
        assert first.stdout is not None
        assert first.stdout.readline().strip() == "HUNG"  # inside the slow task
    finally:
        kill(first)
    before = _spans(spans)
    assert not [s for s in before if s["name"].startswith("agentlog.run")]  # killed mid-run
    second = subprocess.run(
        [sys.executable, *worker, "second"],
        cwd=REPO_ROOT, env=child_env(), capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr[-3000:]
    ended = json.loads(second.stdout.splitlines()[-1])
    assert ended == {"status": "completed", "takeovers": 1}
    every = _spans(spans)
    assert len({s["context"]["trace_id"] for s in every}) == 1  # one trace, two processes
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
