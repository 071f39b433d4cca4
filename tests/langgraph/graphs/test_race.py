"""Two processes racing on one thread: no fork, and the loser gets the typed error.

The test parks ``TRIALS`` threads on their first interrupt, then starts two
long-lived processes (tests/langgraph/graphs/race_child.py) that answer every
thread's interrupt at the same moment, each on its own saver object, with
barriers that make both load the same checkpoint and run the resumed node
before either writes its successor. Per thread: each namespace's history is
one chain, exactly one process won and the other got
``agentlog.errors.ThreadConflictError``, never another error, the state holds
the winner's answer only, and the thread then runs to its end from a new
saver.

A second test runs the same race on LangGraph's SqliteSaver and checks that
the harness sees that saver fork threads (langgraph issue 8796): the race is
real, and a fork would not go unnoticed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.crash.worker import child_env
from tests.langgraph.graphs.checks import chain_problems
from tests.langgraph.graphs.graphs import (
    SaverKind,
    build_graph,
    config_for,
    drive_once,
    open_saver,
)

REPO = Path(__file__).resolve().parents[3]
SAVER: SaverKind = "agentlog"
TRIALS = 50
RACERS = ("A", "B")


def race(kind: SaverKind, url: str, barriers: Path, trials: int) -> list[tuple[Any, Any]]:
    """Park ``trials`` threads, race the two processes on them; per thread, (A's, B's) outcome."""
    with open_saver(kind, url) as saver:
        graph = build_graph(saver)
        for trial in range(trials):
            assert not drive_once(graph, f"race-{trial}", "sync")
            assert graph.get_state(config_for(f"race-{trial}")).interrupts
    barriers.mkdir()
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.langgraph.graphs.race_child",
                url,
                str(barriers),
                name,
                peer,
                str(trials),
                kind,
            ],
            cwd=REPO,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, peer in (RACERS, RACERS[::-1])
    ]
    results = []
    for child in children:
        try:
            out, err = child.communicate(timeout=300)  # a hang guard only
        finally:
            if child.poll() is None:
                child.kill()
                child.communicate()
        assert child.returncode == 0, f"racer failed ({child.returncode}):\n{err[-3000:]}"
        results.append(json.loads(out.strip().splitlines()[-1]))
    return list(zip(*results, strict=True))


def review_answers(saver: Any, thread_id: str) -> set[str]:
    """The first review's answers in the thread's state: whose answer it took."""
    values = build_graph(saver).get_state(config_for(thread_id)).values
    return {m.id.rsplit("-", 1)[1] for m in values["messages"] if m.id.startswith("m-review-0-")}


# A hang guard only: two interpreters racing on 50 threads on a loaded machine.
@pytest.mark.process
@pytest.mark.timeout(600)
def test_two_processes_race_on_one_thread(tmp_path: Path) -> None:
    from agentlog.errors import ThreadConflictError

    conflict = f"{ThreadConflictError.__module__}.{ThreadConflictError.__qualname__}"
    url = f"sqlite:///{tmp_path / 'agentlog.db'}"
    outcomes = race(SAVER, url, tmp_path / "barriers", TRIALS)
    with open_saver(SAVER, url) as saver:
        for trial, pair in enumerate(outcomes):
            thread_id = f"race-{trial}"
            assert not chain_problems(saver, thread_id), f"{thread_id} forked: {pair}"
            kinds = [outcome[0] for outcome in pair]
            # Exactly one winner: the loser's late claim never fences a writer ahead of it.
            assert sorted(kinds) == sorted(["won", conflict]), f"{thread_id}: outcomes {pair}"
            winner = RACERS[kinds.index("won")]
            assert review_answers(saver, thread_id) == {winner}, thread_id
    with open_saver(SAVER, url) as saver:  # every thread goes on from a new saver
        graph = build_graph(saver)
        for trial in range(TRIALS):
            while not drive_once(graph, f"race-{trial}", "sync"):
                pass
            assert not chain_problems(saver, f"race-{trial}")


@pytest.mark.process
@pytest.mark.timeout(300)
def test_race_harness_sees_langgraph_sqlite_saver_fork(tmp_path: Path) -> None:
    trials = 5
    url = f"sqlite:///{tmp_path / 'langgraph.db'}"
    outcomes = race("langgraph-sqlite", url, tmp_path / "barriers", trials)
    with open_saver("langgraph-sqlite", url) as saver:
        forked = [t for t in range(trials) if chain_problems(saver, f"race-{t}")]
    assert all(pair == (["won", ""], ["won", ""]) for pair in outcomes), outcomes
    assert forked == list(range(trials)), "both racers won: every thread must show the fork"
