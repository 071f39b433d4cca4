"""A writer stalled at its side effect's intent, then taken over, never begins the effect.

Each trial runs the zombie workflow (tests/eventlog/kafka/zombie_worker.py) in a
process that SIGSTOPs itself at its first TaskStarted append: just before
it (the append then happens after the takeover and must fail) or just after
it (the intent is durable; the effect has not begun). A second process takes
the run over once the zombie's lease has run out and completes it. Then the
zombie gets SIGCONT. The dedup service (a separate process) saw every effect
that began: the zombie must have begun none, and every effect that ran has
its TaskStarted in the log.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import TaskStarted
from tests.crash.worker import child_env
from tests.eventlog.kafka.zombie_worker import ROLES

pytestmark = [pytest.mark.kafka, pytest.mark.crash]

REPO = Path(__file__).resolve().parents[3]
#: (durability, where the zombie stops), each twice: eight trials.
TRIALS = [(d, w) for d in ("sync", "async") for w in ("before", "after")] * 2
GUARD_S = 120  # hang guard for one process


def _spawn(args: list[str], log_file: Path) -> subprocess.Popen[str]:
    with log_file.open("w") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.eventlog.kafka.zombie_worker", *args],
            cwd=REPO,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )


def _wait_stopped(pid: int) -> None:
    """Until the kernel shows the process stopped (state T), bounded by GUARD_S."""
    deadline = time.monotonic() + GUARD_S
    while time.monotonic() < deadline:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state in ("T", "t"):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not stop")


def _dump(dedup: str, run_id: str) -> dict[str, list[list[Any]]]:
    with urllib.request.urlopen(f"{dedup}/dump?run={run_id}", timeout=30) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


async def _intents(url: str, run_id: str) -> set[str]:
    async with await open_log(url) as log:
        return {e.data.key async for e in log.read(run_id) if isinstance(e.data, TaskStarted)}


def _trial(url: str, dedup: str, run_id: str, durability: str, when: str, logs: Path) -> list[str]:
    """One trial; the violations it found."""
    zombie = _spawn([url, run_id, dedup, "zombie", durability, when], logs / f"{run_id}-z.log")
    try:
        assert zombie.stdout is not None
        line = zombie.stdout.readline().strip()
        assert line == "STOPPING", (logs / f"{run_id}-z.log").read_text()[-3000:]
        _wait_stopped(zombie.pid)
        owner = _spawn([url, run_id, dedup, "owner"], logs / f"{run_id}-o.log")
        out, _ = owner.communicate(timeout=GUARD_S)
        report = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
        assert report.get("outcome") == "completed", (logs / f"{run_id}-o.log").read_text()[-3000:]
    finally:
        zombie.send_signal(signal.SIGCONT)
        zombie.communicate(timeout=GUARD_S)
    seen = _dump(dedup, run_id)["deliveries"]
    intents = asyncio.run(_intents(url, run_id))
    violations = []
    for gen, key, *_ in seen:
        if gen == ROLES["zombie"]:
            violations.append(f"{durability}/{when}: the zombie began the effect of {key}")
        if key not in intents:
            violations.append(f"{durability}/{when}: effect {key} ran with no TaskStarted")
    applied = [key for gen, key, _kind, _arg, duplicate, _ in seen if not duplicate]
    if sorted(applied) != sorted(set(applied)) or len(set(applied)) != 3:
        violations.append(f"{durability}/{when}: effects applied {applied}")
    return violations


@pytest.mark.timeout(900)
def test_a_fenced_zombie_never_begins_an_effect(
    kafka_bootstrap: str, kafka_name: str, dedup_url: str, tmp_path: Path
) -> None:
    url = f"kafka://{kafka_bootstrap}/{kafka_name}"
    violations: list[str] = []
    for n, (durability, when) in enumerate(TRIALS):
        run_id = f"zombie-{n}-{uuid.uuid4().hex[:6]}"
        violations += _trial(url, dedup_url, run_id, durability, when, tmp_path)
    assert violations == [], f"{len(violations)} violations in {len(TRIALS)} trials:\n" + (
        "\n".join(violations)
    )
