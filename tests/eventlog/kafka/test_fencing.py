"""Two processes resume the same run, trial after trial: exactly one proceeds."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentlog.eventlog.events import Event, TaskCompleted
from agentlog.eventlog.kafka import KafkaConfig, KafkaEventLog
from tests.eventlog.kafka.fence_worker import STEPS

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[3]
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
                    [sys.executable, "-m", "tests.eventlog.kafka.fence_worker", url, f"w{i}"],
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


RACES = 5


async def _race(log: KafkaEventLog, run_id: str, epoch: int) -> tuple[str, str]:
    """Renew the lease and append at once; the names of what each raised.

    Only names leave this frame: the exceptions' tracebacks would keep the
    fenced producer (and aiokafka's unretrieved futures in it) alive.
    """
    results = await asyncio.gather(
        log.renew_lease(run_id, epoch, 30),
        log.append([Event(run_id, 2, TaskCompleted("old", 2), writer_epoch=epoch)]),
        return_exceptions=True,
    )
    return type(results[0]).__name__, type(results[1]).__name__


async def test_fenced_writer_whose_renewal_and_append_race_gets_fenced_error(
    kafka_bootstrap: str, kafka_name: str
) -> None:
    """The renewal finds the fence first and retires the producer (aiokafka leaves
    it in FATAL_ERROR); the append queued behind it must say FencedError too,
    never aiokafka's AssertionError, and write nothing."""
    config = KafkaConfig(bootstrap_servers=kafka_bootstrap, name=kafka_name, partitions=1)
    async with (
        await KafkaEventLog.connect(config) as old,
        await KafkaEventLog.connect(config) as new,
    ):
        for race in range(RACES):
            run_id = f"race-{race}"
            epoch = await old.claim_writer(run_id, owner="old", lease_seconds=30)
            await old.append([Event(run_id, 1, TaskCompleted("old", 1), writer_epoch=epoch)])
            newer = await new.claim_writer(run_id, owner="new", lease_seconds=30)
            renewal, append = await _race(old, run_id, epoch)
            assert (renewal, append) == ("FencedError", "FencedError")
            await new.append([Event(run_id, 2, TaskCompleted("new", 2), writer_epoch=newer)])
            events = [e async for e in new.read(run_id)]
            assert [(e.seq, e.writer_epoch) for e in events] == [(1, epoch), (2, newer)]
            info = await new.get_run(run_id)
            assert (info.writer_epoch, info.lease_owner) == (newer, "new")
        # aiokafka 0.14 leaves a fenced batch's internal drain future unretrieved;
        # collect it now, while nothing else runs: collected later inside an import,
        # its log call makes CPython 3.11.7's AST validator fail ("recursion depth
        # mismatch") in whatever is being imported.
        gc.collect()
