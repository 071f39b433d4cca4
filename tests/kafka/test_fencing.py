"""Two processes resume the same run, trial after trial: exactly one proceeds."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog
from tests.kafka.fence_worker import STEPS

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[2]
TRIALS = 100


def _line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(timeout=30)
        raise AssertionError(f"worker exited early (rc={proc.returncode}); see its log")
    return line.strip()


def _send(proc: subprocess.Popen[str], text: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(text + "\n")
    proc.stdin.flush()


async def _verify(config: KafkaConfig, results: list[list[dict[str, Any]]]) -> None:
    async with await KafkaEventLog.connect(config) as log:
        for trial, pair in enumerate(results):
            winner = max(pair, key=lambda r: r["epoch"])
            loser = min(pair, key=lambda r: r["epoch"])
            # Exactly one proceeds: the newer epoch writes every step; the older is
            # fenced on its first append and stops, having written nothing.
            assert (winner["fenced"], winner["written"]) == (False, list(range(1, STEPS + 1)))
            assert (loser["fenced"], loser["written"]) == (True, [])
            events = [e async for e in log.read(f"trial-{trial}")]
            assert [e.seq for e in events] == list(range(1, STEPS + 1))
            assert {e.writer_epoch for e in events} == {winner["epoch"]}
            info = await log.get_run(f"trial-{trial}")
            assert (info.last_seq, info.writer_epoch) == (STEPS, 2)


@pytest.mark.timeout(240)
def test_two_resuming_processes_one_proceeds_and_history_never_forks(
    kafka_bootstrap: str, kafka_name: str, tmp_path: Path
) -> None:
    config = KafkaConfig(bootstrap_servers=kafka_bootstrap, name=kafka_name, partitions=2)
    asyncio.run(_verify(config, []))  # creates the topics before the race
    url = f"kafka://{kafka_bootstrap}/{kafka_name}"
    results: list[list[dict[str, Any]]] = []
    with contextlib.ExitStack() as stack:
        procs = []
        for i in range(2):
            log_file = stack.enter_context((tmp_path / f"w{i}.log").open("w"))
            proc = stack.enter_context(
                subprocess.Popen(
                    [sys.executable, "-m", "tests.kafka.fence_worker", url, f"w{i}"],
                    cwd=REPO,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log_file,
                    text=True,
                )
            )
            procs.append(proc)
        try:
            for trial in range(TRIALS):
                for proc in procs:  # both claim at the same time ...
                    _send(proc, str(trial))
                epochs = [int(_line(proc).split()[2]) for proc in procs]
                assert sorted(epochs) == [1, 2], epochs
                for proc in procs:  # ... and only then both resume
                    _send(proc, "go")
                results.append([json.loads(_line(proc)) for proc in procs])
        finally:
            for proc in procs:
                if proc.stdin:
                    proc.stdin.close()
            for proc in procs:
                proc.wait(timeout=60)
    assert len(results) == TRIALS
    asyncio.run(_verify(config, results))
