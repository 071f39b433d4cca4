"""A run's trace spans a worker SIGKILL and a takeover on a worker fleet (SQLite, Kafka).

Real processes (tests/otel/traced_worker.py): a client submits run ``r``; the
first worker drives it until its ``slow`` task runs and is SIGKILLed there; a
second worker takes the run over (on Kafka: once the group hands it the dead
worker's partitions) and finishes it. Every process writes each span it ends
to one file. Their spans are one trace, the second worker's run span is a
child of the client's start span, it counts and records one takeover, and the
task the first worker died in runs again under the same idempotency key.
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

pytestmark = [pytest.mark.fleet, pytest.mark.process]

REPO_ROOT = Path(__file__).resolve().parents[2]


def _spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO_ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.timeout(400)
def test_a_trace_spans_a_worker_sigkill_and_a_takeover(
    backend: str, log_url: str, worker_url: str, tmp_path: Path
) -> None:
    spans = tmp_path / "spans.jsonl"
    traced = ["-m", "tests.otel.traced_worker"]
    first = spawn_ready([*traced, worker_url, str(spans), "first", "fleet"], tmp_path / "first.log")
    try:
        submitted = _run([*traced, log_url, str(spans), "submit", "fleet"], 120)
        assert submitted.stdout.strip() == "SUBMITTED", submitted.stderr[-3000:]
        assert first.stdout is not None
        assert first.stdout.readline().strip() == "HUNG"  # inside the slow task
    finally:
        kill(first)
    before = _spans(spans)
    assert not [s for s in before if s["name"].startswith("agentlog.run")]  # killed mid-run
    second = _run([*traced, worker_url, str(spans), "second", "fleet"], 300)
    assert second.returncode == 0, second.stderr[-3000:]
    ended = json.loads(second.stdout.splitlines()[-1])
    assert ended == {"status": "completed", "takeovers": 1}
    every = _spans(spans)
    assert len({s["context"]["trace_id"] for s in every}) == 1  # one trace, three processes
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in every:
        by_name.setdefault(span["name"], []).append(span)
    (start,) = by_name["agentlog.start traced"]  # the client's
    (run,) = by_name["agentlog.run traced"]  # the second worker's: the first never ended
    assert run["parent_id"] == start["context"]["span_id"]
    assert run["attributes"]["agentlog.worker"] == "second"
    assert run["attributes"]["agentlog.status"] == "completed"
    (takeover,) = by_name["agentlog.takeover"]
    assert takeover["attributes"]["agentlog.worker"] == "second"
    assert takeover["attributes"]["agentlog.run_id"] == "r"
    (prepare,) = by_name["agentlog.task prepare"]  # ended on the first worker, not re-run
    assert prepare in before
    (slow,) = by_name["agentlog.task slow"]  # the first worker's attempt never ended
    assert slow not in before
    (step,) = by_name["agentlog.step hang"]
    assert slow["parent_id"] == step["context"]["span_id"]
    assert step["parent_id"] == run["context"]["span_id"]
    keys = asyncio.run(_slow_keys(log_url))
    assert len(keys) == 2  # started by the first worker, again by the second
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
