"""SIGKILL a process mid-graph, resume the thread from a new process.

Each trial runs the test graph (tests/langgraph/graphs/graphs.py) on a fresh
SQLite log with agentlog's saver, in a child process
(tests/langgraph/graphs/crash_child.py). Every node records its execution in
a counting store of its own, committed before the node returns. The parent
SIGKILLs the child after a seeded random number of node executions (plus a
seeded random delay), up to ``KILLS`` times, then lets a last child resume
the thread to its end. Between two children the parent reads, through a new
saver, what the log kept. It asserts:

* the final state equals an uninterrupted run's (the same graph on
  LangGraph's InMemorySaver), and each namespace's history is one chain;
* no node execution whose writes the log held when a child started ran
  again in that child (a task of a committed step, or a task with its own
  pending writes).
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from tests.crash.worker import child_env
from tests.langgraph.graphs.checks import SavedWork, assert_linear
from tests.langgraph.graphs.graphs import (
    DURABILITIES,
    Executions,
    SaverKind,
    build_graph,
    config_for,
    drive_once,
    open_saver,
    plain,
)

pytestmark = [pytest.mark.crash, pytest.mark.slow]  # 44-124 s

REPO = Path(__file__).resolve().parents[3]
SAVER: SaverKind = "agentlog"
TRIALS = 8
KILLS = 2
THREAD = "crash-thread"
#: Hang guards only: a child that neither ends nor gets killed.
CHILD_TIMEOUT = 120.0


def uninterrupted(tmp_path: Path) -> tuple[Any, int]:
    """The reference: final state and number of node executions of one whole run."""
    executions = Executions(tmp_path / "reference-executions.db")
    graph = build_graph(InMemorySaver(), executions)
    while not drive_once(graph, THREAD, "sync"):
        pass
    return plain(graph.get_state(config_for(THREAD)).values), executions.count()


def run_child(
    url: str,
    durability: str,
    executions: Executions,
    gen: int,
    kill_after: int | None,
    delay: float,
    logs: Path,
) -> tuple[bool, Any]:
    """One child; SIGKILLed ``delay`` s after its ``kill_after``-th node execution.

    Returns (whether it was killed, its final state when it ended).
    """
    before = executions.count()
    stderr_path = logs / f"child-{gen}.log"
    with open(stderr_path, "w") as stderr:
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.langgraph.graphs.crash_child",
                url,
                THREAD,
                durability,
                str(executions.path),
                str(gen),
                SAVER,
            ],
            cwd=REPO,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        try:
            if kill_after is not None:
                deadline = time.monotonic() + CHILD_TIMEOUT
                # Wait on the real condition: the child's kill_after-th execution is
                # committed in the counting store, or the child ended first.
                while child.poll() is None and executions.count() - before < kill_after:
                    assert time.monotonic() < deadline, "the child neither ran nor ended"
                    time.sleep(0.002)
                time.sleep(delay)
                if child.poll() is None:
                    child.send_signal(signal.SIGKILL)
            out, _ = child.communicate(timeout=CHILD_TIMEOUT)
        finally:
            if child.poll() is None:
                child.kill()
                child.communicate()
    if child.returncode == -signal.SIGKILL:
        return True, None
    assert child.returncode == 0, f"child {gen} failed:\n{stderr_path.read_text()[-3000:]}"
    return False, json.loads(out.strip().splitlines()[-1])


def read_saved(url: str) -> SavedWork:
    with open_saver(SAVER, url) as saver:
        return SavedWork.read(saver, THREAD)


@pytest.mark.timeout(900)
def test_sigkill_mid_graph_then_resume(tmp_path: Path) -> None:
    expected, per_run = uninterrupted(tmp_path)
    landed = resumed_with_work = reran = 0
    for trial in range(TRIALS):
        rng = random.Random(f"lg-crash-{trial}")
        durability = DURABILITIES[trial % len(DURABILITIES)]
        trial_dir = tmp_path / f"trial-{trial}"
        trial_dir.mkdir()
        url = f"sqlite:///{trial_dir / 'agentlog.db'}"
        executions = Executions(trial_dir / "executions.db")
        views: list[SavedWork] = []
        final = None
        for gen in range(KILLS + 1):
            views.append(read_saved(url) if gen else SavedWork())
            kill_after = rng.randint(1, per_run - 1) if gen < KILLS else None
            killed, final = run_child(
                url, durability, executions, gen, kill_after, rng.uniform(0, 0.03), trial_dir
            )
            landed += killed
            if not killed:
                break
        assert final is not None, f"trial {trial}: the last child did not end the thread"
        assert final == expected, f"trial {trial} ({durability}): final state differs"
        for gen, node, ns, step, _ in executions.rows():
            assert not views[gen].holds(ns, step), (
                f"trial {trial} ({durability}): {node} ({ns}, step {step}) ran again in "
                f"child {gen} although the log held its writes"
            )
        resumed_with_work += sum(1 for view in views[1:] if view.steps)
        reran += len(executions.rows()) - per_run  # executions a crash cost
        with open_saver(SAVER, url) as saver:
            assert_linear(saver, THREAD)
            assert plain(build_graph(saver).get_state(config_for(THREAD)).values) == expected
    print(
        f"LG-CRASH kills={landed} resumed-with-saved-work={resumed_with_work} re-executions={reran}"
    )
    assert landed >= TRIALS, "most kills must land: the graph runs longer than the kill point"
    assert resumed_with_work >= 1, "no child ever resumed from saved work"
