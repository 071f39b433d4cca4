"""The replay check on histories written by SIGKILLed workers (SQLite).

A run of the crash workflow is killed at several seqs (its batch lost, or
durable with nothing after it) and finished by fresh processes, as in
test_crash_resume.py; ``agentlog verify``'s check must then find the whole
history, crashes and takeovers included, matched by the unchanged code.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from agentlog.eventlog._urls import open_log
from agentlog.replay import verify_runs
from tests.crash.test_crash_resume import read_view, run_generation
from tests.crash.worker import crash_workflow

pytestmark = pytest.mark.crash

#: (kill when, seqs after the last one recorded) for the first processes.
KILLS = [("after", 4), ("before", 3), ("after", 6), ("before", 2)]
#: A hang guard on processes: each kill takes one, and on a loaded machine a
#: worker may also stop itself when its short lease ran out (LEASE_LOST).
MAX_PROCESSES = 10 * len(KILLS)


async def _verify(url: str, run_id: str, dedup: str) -> list[tuple[str, str]]:
    log = await open_log(url)
    try:
        report = await verify_runs(log, [crash_workflow(run_id, dedup, 0)], runs="all")
    finally:
        await log.close()
    return [(r.status, str(r.divergences)) for r in report.runs]


@pytest.mark.timeout(600)  # a hang guard: up to a dozen worker processes
@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_run_killed_and_resumed_verifies_clean(
    dedup_url: str, durability: str, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    run_id = f"verify-{durability}-{os.getpid()}"
    kills = list(KILLS)
    killed_at: list[int] = []
    for gen in range(MAX_PROCESSES):
        last = read_view(url, run_id).last_seq
        kill = (kills[0][0], float(last + kills[0][1])) if kills else None
        killed, report = run_generation(
            url, run_id, durability, dedup_url, gen, "recover", kill, tmp_path
        )
        if killed:
            kills.pop(0)
            killed_at.append(last)
        if report is not None:
            break
    else:
        pytest.fail(f"the run did not complete in {gen + 1} processes")
    assert report["status"] == "completed" and len(killed_at) == len(KILLS)
    assert asyncio.run(_verify(url, run_id, dedup_url)) == [("matched", "()")]
