"""Crash tests: SIGKILL a worker at seeded random points, resume in a fresh process.

Each scenario runs the crash workflow (tests/crash/worker.py) in a
subprocess, kills it with SIGKILL at a seeded random point (at an event seq,
just before or just after its batch is appended, or after a random delay),
then continues the run from a brand-new process (``recover()`` or
``start()`` with the same run id), until the run completes. Between two
processes the test reads what the log holds, and afterwards checks it
against what the dedup service (a separate process) saw:

* the final state equals an uninterrupted reference run's;
* every side effect was applied at most once per idempotency key, and a key
  was delivered again only while its result was not yet recorded, and only
  after its intent (TaskStarted) was;
* a step whose StepCompleted was recorded never executed again; with sync
  durability only the superstep in flight re-ran, with async only steps
  after the last recorded superstep commit.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import StepCompleted, TaskCompleted, TaskStarted
from agentlog.projector import fold
from tests.crash.worker import LEASE_LOST, child_env, lease_for

pytestmark = pytest.mark.crash

REPO = Path(__file__).resolve().parents[2]
KILLS_PER_SCENARIO = 5
SEEDS = (11, 22, 33)


@dataclass
class LogView:
    """What the log held when one process was gone."""

    last_seq: int = 0
    superstep: int = 0
    status: str = ""
    completed_steps: set[tuple[str, int, int]] = field(default_factory=set)
    started_keys: set[str] = field(default_factory=set)
    completed_keys: set[str] = field(default_factory=set)
    results: dict[str, Any] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    steps: int = 0


async def _read_view(url: str, run_id: str) -> LogView:
    log = await open_log(url)
    try:
        info = await log.find_run(run_id)
        if info is None or info.last_seq == 0:
            return LogView()
        events = [e async for e in log.read(run_id)]
    finally:
        await log.close()
    state = fold(events)
    view = LogView(state.seq, state.superstep, state.status, values=state.values, steps=state.steps)
    for event in events:
        data = event.data
        if isinstance(data, StepCompleted):
            view.completed_steps.add((data.step, data.superstep, data.branch))
        elif isinstance(data, TaskStarted):
            view.started_keys.add(data.key)
        elif isinstance(data, TaskCompleted):
            view.completed_keys.add(data.key)
            view.results[data.key] = data.result
    return view


def read_view(url: str, run_id: str) -> LogView:
    return asyncio.run(_read_view(url, run_id))


def run_generation(
    url: str,
    run_id: str,
    durability: str,
    dedup: str,
    gen: int,
    resume_with: str,
    kill: tuple[str, float] | None,
    logs: Path,
    lease_seconds: float | None = None,
) -> tuple[bool, dict[str, Any] | None]:
    """One worker process; returns (killed, its final report when it finished).

    A worker that stopped itself because its lease ran out (LEASE_LOST, on a
    loaded machine) returns (False, None): the next generation takes over.
    """
    lease = lease_seconds if lease_seconds is not None else lease_for(url)
    extra = ["--resume-with", resume_with, "--lease-seconds", str(lease)]
    if kill is not None and kill[0] in ("before", "after"):
        extra += ["--kill-seq", str(int(kill[1])), "--kill-when", kill[0]]
    stderr_path = logs / f"worker-{run_id}-{gen}.log"
    with open(stderr_path, "w") as stderr:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.crash.worker",
                url,
                run_id,
                durability,
                dedup,
                str(gen),
                *extra,
            ],
            cwd=REPO,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        try:
            assert proc.stdout is not None
            ready = proc.stdout.readline().strip()
            if kill is not None and kill[0] == "time" and ready == "READY":
                proc.stdout.readline()  # RUNNING: the run is in this process now
                time.sleep(kill[1])
                proc.send_signal(signal.SIGKILL)
            out, _ = proc.communicate(timeout=240)  # hang guard
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    if proc.returncode == -signal.SIGKILL:
        return True, None
    if proc.returncode == LEASE_LOST:
        return False, None
    assert ready == "READY" and proc.returncode == 0, (
        f"worker gen {gen} failed ({proc.returncode}):\n{stderr_path.read_text()[-8000:]}"
    )
    return False, json.loads(out.strip().splitlines()[-1])


def dump(dedup: str, run_id: str) -> dict[str, list[list[Any]]]:
    with urllib.request.urlopen(f"{dedup}/dump?run={run_id}", timeout=30) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


_REFERENCE: dict[str, LogView] = {}
#: The reference worker's lease, in seconds.
REFERENCE_LEASE_S = 30.0


def reference(url: str, dedup: str, backend: str, logs: Path) -> LogView:
    """An uninterrupted run of the same workflow on the same backend (once per backend)."""
    if backend not in _REFERENCE:
        run_id = f"reference-{backend}-{os.getpid()}"
        # Never killed, so nobody waits out its lease: a long one, so that a
        # loaded machine cannot make it stop itself (LEASE_LOST) mid-reference.
        killed, report = run_generation(
            url, run_id, "sync", dedup, 0, "recover", None, logs, lease_seconds=REFERENCE_LEASE_S
        )
        assert not killed and report is not None and report["status"] == "completed", (
            f"the reference run did not complete (lease lost?): {report}"
        )
        _REFERENCE[backend] = read_view(url, run_id)
    return _REFERENCE[backend]


def check_history(views: list[LogView], seen: dict[str, list[list[Any]]], durability: str) -> None:
    """``views[g]`` is the log as generation g found it (views[0]: nothing yet)."""
    final = views[-1]
    deliveries: dict[str, list[tuple[int, int, str]]] = {}
    for gen, key, _kind, _arg, duplicate, result in seen["deliveries"]:
        deliveries.setdefault(key, []).append((gen, duplicate, result))
    assert set(deliveries) == final.completed_keys, "a side effect without a recorded result"
    for key, calls in deliveries.items():
        applied = [c for c in calls if not c[1]]
        assert len(applied) == 1, f"key {key} applied {len(applied)} times"
        assert final.results[key] == applied[0][2], "the recorded result is not the service's"
        gens = [c[0] for c in calls]
        assert len(gens) == len(set(gens)), f"key {key} delivered twice by one process"
        for gen in gens:
            # the intent was durable before the effect ran...
            assert key in views[gen + 1].started_keys, f"key {key}: effect before its intent"
            # ...and a key goes out again only while its result is not recorded
            assert key not in views[gen].completed_keys, f"key {key} recomputed in gen {gen}"
    executed: dict[tuple[str, int, int], list[int]] = {}
    for gen, step, superstep, branch, _attempt in seen["steps"]:
        identity = (step, superstep, branch)
        assert identity not in views[gen].completed_steps, (
            f"step {identity} ran in gen {gen} although its StepCompleted was recorded"
        )
        earlier = executed.setdefault(identity, [])
        if earlier and earlier[-1] != gen:  # re-executed by a later process
            if durability == "sync":
                assert superstep == views[gen].superstep, (
                    f"sync: step {identity} re-ran in gen {gen} but superstep "
                    f"{views[gen].superstep} was the one in flight"
                )
            else:
                assert superstep >= views[gen].superstep, f"async: committed step {identity} re-ran"
        earlier.append(gen)


# A hang guard only: up to 15 worker processes on a loaded 2-core machine.
@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("resume_with", ["recover", "start"])
@pytest.mark.parametrize("durability", ["sync", "async"])
def test_sigkill_and_resume(
    crash_log_url: str,
    dedup_url: str,
    durability: str,
    resume_with: str,
    seed: int,
    tmp_path: Path,
) -> None:
    backend = crash_log_url.split(":", 1)[0]
    expected = reference(crash_log_url, dedup_url, backend, tmp_path)
    rng = random.Random(f"{seed}-{durability}-{resume_with}-{backend}")
    run_id = f"crash-{backend}-{durability}-{resume_with}-{seed}-{os.getpid()}"
    views = [LogView()]
    planned = landed = timed = 0
    for gen in range(KILLS_PER_SCENARIO * 3):
        last = views[-1].last_seq
        kill: tuple[str, float] | None = None
        if planned + timed < KILLS_PER_SCENARIO and last < expected.last_seq - 5:
            # A kill at a seq always lands: the run must append that seq to finish.
            # A kill after a random delay lands only if the process is still
            # running then, which depends on the machine's speed: it is never
            # counted on, and the first kill of a scenario is always at a seq.
            kinds = ["before", "after"]
            if planned and last < expected.last_seq - 25:
                kinds.append("time")
            kind = rng.choice(kinds)
            if kind == "time":
                kill = ("time", rng.uniform(0.0, 0.15))
                timed += 1
            else:
                kill = (kind, last + rng.randint(1, 5))
                planned += 1
        killed, report = run_generation(
            crash_log_url, run_id, durability, dedup_url, gen, resume_with, kill, tmp_path
        )
        views.append(read_view(crash_log_url, run_id))
        if killed and kill is not None and kill[0] != "time":
            landed += 1
        elif report is None and kill is not None and kill[0] != "time":
            planned -= 1  # it stopped itself first (its lease ran out): no kill came
        if report is not None:
            break
    else:
        pytest.fail(f"the run did not complete in {gen + 1} processes")
    print(f"KILLS {run_id} at-seq={landed}/{planned} timed={timed} gens={len(views) - 1}")
    assert planned >= 1 and landed == planned, f"{landed} of {planned} kills at a seq landed"
    final = views[-1]
    assert report["status"] == "completed" and final.status == "completed"
    assert final.values == expected.values == report["values"]
    assert final.steps == expected.steps
    assert {s[:2] for s in final.completed_steps} == {s[:2] for s in expected.completed_steps}
    check_history(views, dump(dedup_url, run_id), durability)
