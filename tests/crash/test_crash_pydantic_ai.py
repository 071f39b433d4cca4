"""SIGKILL a process running a Pydantic AI agent at seeded random points, on SQLite and Kafka.

Each run of the support agent (tests/pydantic_ai/agents.py: four model
requests, three tool calls, one approval) is driven by worker processes
(tests/crash/pydantic_ai_worker.py). A worker is SIGKILLed at a seeded random
point: right after a model request or tool call was delivered and before its
result was recorded, or when a batch of events reaches a random seq (just
before or just after it is appended). A fresh process then takes the run over,
until it completes. Between two processes the test reads which task results
the log holds; afterwards it checks against the dedup service (a separate
process that saw every delivery with its idempotency key):

* no model request or tool call whose result was recorded ran again;
* the output equals the one Pydantic AI alone gives for the same agent.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.crash.test_crash_resume import read_view
from tests.crash.worker import LEASE_LOST, child_env
from tests.pydantic_ai.agents import uninterrupted_output

pytestmark = pytest.mark.crash

REPO = Path(__file__).resolve().parents[2]
SEED = 25
RUNS = 3
MAX_PROCESSES = 12  # per run: the bound on kills and takeovers


def _kill_point(rng: random.Random, first: bool, last_seq: int) -> list[str]:
    """Where the next process dies: the first always mid-call, which it surely reaches."""
    how = "effect" if first else rng.choice(["effect", "before", "after", "none"])
    if how == "effect":
        return ["--kill-effect", str(rng.randint(1, 4))]
    if how == "none":
        return []
    return ["--kill-seq", str(last_seq + rng.randint(1, 12)), "--kill-when", how]


def _worker(url: str, run_id: str, dedup: str, gen: int, kill: list[str], logs: Path) -> Any:
    """One worker process: its exit code and its stdout."""
    command = [sys.executable, "-m", "tests.crash.pydantic_ai_worker", url, run_id, dedup]
    with open(logs / f"{run_id}-{gen}.log", "w") as stderr:
        done = subprocess.run(
            [*command, str(gen), *kill],
            cwd=REPO, env=child_env(), stdout=subprocess.PIPE, stderr=stderr, text=True,
            timeout=180, check=False,
        )  # fmt: skip
    return done.returncode, done.stdout


def _deliveries(dedup: str, run_id: str) -> list[list[Any]]:
    with urllib.request.urlopen(f"{dedup}/dump?run={run_id}", timeout=30) as response:
        deliveries: list[list[Any]] = json.loads(response.read())["deliveries"]
    return deliveries


@pytest.fixture(params=["sqlite", pytest.param("kafka", marks=pytest.mark.kafka)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh log on SQLite or on Kafka."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'crash.db'}"
    bootstrap = request.getfixturevalue("kafka_bootstrap")
    return f"kafka://{bootstrap}/pydantic{uuid.uuid4().hex[:10]}"


@pytest.mark.process
def test_sigkill_at_random_points_repeats_no_completed_call(
    url: str, dedup_url: str, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    backend = url.split(":")[0]
    expected = asyncio.run(uninterrupted_output())
    kills = repeated_model_calls = repeated_tool_calls = 0
    for index in range(RUNS):
        run_id = f"{backend}-agent-{index}"  # the dedup service is the session's
        recorded_before: dict[int, set[str]] = {}
        output: Any = None
        for gen in range(MAX_PROCESSES):
            view = read_view(url, run_id)
            recorded_before[gen] = view.completed_keys
            kill = _kill_point(rng, gen == 0, view.last_seq)
            code, stdout = _worker(url, run_id, dedup_url, gen, kill, tmp_path)
            if code == -signal.SIGKILL:
                kills += 1
                continue
            if code == LEASE_LOST:
                continue
            log = (tmp_path / f"{run_id}-{gen}.log").read_text()
            assert code == 0, f"{run_id} process {gen} ({kill}) exited {code}:\n{log[-3000:]}"
            output = json.loads(stdout)["output"]
            break
        else:
            pytest.fail(f"{run_id} did not complete in {MAX_PROCESSES} processes")
        assert output == expected, run_id
        for gen, key, kind, *_ in _deliveries(dedup_url, run_id):
            if key in recorded_before[gen]:  # its result was recorded before this process began
                if kind == "model":
                    repeated_model_calls += 1
                else:
                    repeated_tool_calls += 1
    repeated = f"repeated model calls {repeated_model_calls}, tool calls {repeated_tool_calls}"
    print(f"{backend}: kills {kills}, runs {RUNS}, {repeated}")
    assert kills >= RUNS
    assert (repeated_model_calls, repeated_tool_calls) == (0, 0)
