"""SIGKILL an OpenAI Agents SDK run at seeded random points on SQLite; no recorded call runs again.

Each scenario runs the support agents (tests/openai_agents/agents_app.py:
triage, a lookup tool, a handoff to refunds, a refund tool that needs
approval) in worker processes (openai_agents_worker.py) that SIGKILL
themselves at a seeded random seq, before or after its batch is appended,
and continues the run in a fresh process each time until it completes. The
workers journal every model call and tool call with its idempotency key
(fsynced before the call returns). Afterwards:

* the final answer equals an uninterrupted run's, through the same tasks;
* no process called the model or a tool under a key whose result the log
  already held when that process started (0 repeats of a completed call);
  a key goes out again only while its result is not recorded (at least once);
* a run killed right after the handoff was recorded continues with the
  refunds agent: the triage model is not called again;
* run as ``agent_workflow`` (``--segments``), the log holds one completed
  step per agent segment, triage then refunds, whatever was killed.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import StepCompleted, TaskCompleted, TaskStarted
from agentlog.projector import fold
from tests.crash.worker import LEASE_LOST, child_env

pytestmark = pytest.mark.crash

REPO = Path(__file__).resolve().parents[2]
SEEDS = (7, 8)
KILLS_PER_SCENARIO = 3
_WORKER = (sys.executable, "-m", "tests.crash.openai_agents_worker")


@dataclass
class View:
    """What the log held when one process was gone."""

    last_seq: int = 0
    status: str = ""
    answer: Any = None
    #: (seq, task name) of each TaskCompleted, and the keys completed
    completed: list[tuple[int, str]] = field(default_factory=list)
    completed_keys: set[str] = field(default_factory=set)
    started: list[str] = field(default_factory=list)
    #: the steps completed, in order
    steps: list[str] = field(default_factory=list)


async def _read(url: str, run_id: str) -> View:
    log = await open_log(url)
    try:
        info = await log.find_run(run_id)
        events = [e async for e in log.read(run_id)] if info and info.last_seq else []
    finally:
        await log.close()
    if not events:
        return View()
    state = fold(events)
    answer = state.values.get("answer", state.values.get("output"))
    view = View(state.seq, state.status, answer)
    names: dict[str, str] = {}
    for event in events:
        if isinstance(event.data, TaskStarted):
            names[event.data.key] = event.data.name
            view.started.append(event.data.name)
        elif isinstance(event.data, TaskCompleted):
            view.completed.append((event.seq, names[event.data.key]))
            view.completed_keys.add(event.data.key)
        elif isinstance(event.data, StepCompleted):
            view.steps.append(event.data.step)
    return view


def read(url: str, run_id: str) -> View:
    return asyncio.run(_read(url, run_id))


def generation(
    url: str,
    run_id: str,
    journal: Path,
    gen: int,
    kill: tuple[str, int] | None,
    logs: Path,
    segments: bool = False,
) -> tuple[bool, dict[str, Any] | None]:
    """One worker process: (killed, its final report when it finished)."""
    extra = [] if kill is None else ["--kill-when", kill[0], "--kill-seq", str(kill[1])]
    extra += ["--segments"] if segments else []
    stderr_path = logs / f"oa-worker-{run_id}-{gen}.log"
    with open(stderr_path, "w") as stderr:
        proc = subprocess.run(
            [*_WORKER, url, run_id, str(journal), str(gen), *extra],
            cwd=REPO,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            timeout=240,  # hang guard
        )
    if proc.returncode == -signal.SIGKILL:
        return True, None
    if proc.returncode == LEASE_LOST:
        return False, None
    assert proc.returncode == 0, f"worker gen {gen} failed:\n{stderr_path.read_text()[-6000:]}"
    return False, json.loads(proc.stdout.strip().splitlines()[-1])


def calls(journal: Path) -> list[tuple[int, str, str]]:
    """Every (gen, kind, key) the workers journaled."""
    if not journal.exists():
        return []
    return [tuple(json.loads(line)) for line in journal.read_text().splitlines()]  # type: ignore[misc]


def uninterrupted(tmp: Path, segments: bool) -> View:
    """An uninterrupted run of the same agents."""
    url = f"sqlite:///{tmp / 'reference.db'}"
    killed, report = generation(url, "reference", tmp / "journal", 0, None, tmp, segments)
    assert not killed and report is not None and report["status"] == "completed", report
    view = read(url, "reference")
    assert len(calls(tmp / "journal")) == len(view.completed) == 6  # 4 model calls, 2 tools
    return view


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> View:
    """An uninterrupted run_agent run (one step)."""
    return uninterrupted(tmp_path_factory.mktemp("oa-reference"), segments=False)


@pytest.fixture(scope="module")
def segments_reference(tmp_path_factory: pytest.TempPathFactory) -> View:
    """An uninterrupted agent_workflow run (a step per agent segment)."""
    view = uninterrupted(tmp_path_factory.mktemp("oa-segments-reference"), segments=True)
    assert view.steps == ["triage", "refunds"]
    return view


def collapsed(names: list[str]) -> list[str]:
    """``names`` with each run of one name kept once: a call that was in flight
    when its process died starts again, right after its first start."""
    return [name for i, name in enumerate(names) if i == 0 or names[i - 1] != name]


def check_no_repeats(views: list[View], journal: Path) -> dict[str, int]:
    """``views[g]``: the log as generation g found it. Returns the counts."""
    seen = calls(journal)
    final = views[-1]
    assert {key for _, _, key in seen} == final.completed_keys, "a call without a recorded result"
    for gen, kind, key in seen:
        assert key not in views[gen].completed_keys, (
            f"{kind} ran again in gen {gen} under key {key}, whose result was recorded"
        )
    per_gen = {(gen, key) for gen, _, key in seen}
    assert len(per_gen) == len(seen), "one process called the same key twice"
    return {
        "model_calls": sum(kind.startswith("model:") for _, kind, _ in seen),
        "tool_calls": sum(kind.startswith("tool:") for _, kind, _ in seen),
        "reran_in_flight": len(seen) - len(final.completed_keys),
    }


def run_scenario(
    tmp_path: Path,
    run_id: str,
    kills: list[tuple[str, int]] | random.Random,
    expected: View,
    segments: bool = False,
) -> tuple[list[View], Path, int]:
    """Run generations until the run completes; kills from a list or a seeded rng."""
    url, journal = f"sqlite:///{tmp_path / 'crash.db'}", tmp_path / "journal"
    views, landed = [View()], 0
    planned = list(kills) if isinstance(kills, list) else []
    for gen in range(3 * KILLS_PER_SCENARIO + 3):
        kill: tuple[str, int] | None = None
        last = views[-1].last_seq
        if isinstance(kills, random.Random):
            if landed < KILLS_PER_SCENARIO and last < expected.last_seq - 3:
                kill = (kills.choice(["before", "after"]), last + kills.randint(1, 4))
        elif planned:
            kill = planned.pop(0)
        killed, report = generation(url, run_id, journal, gen, kill, tmp_path, segments)
        views.append(read(url, run_id))
        landed += killed
        if report is not None:
            assert report["status"] == "completed"
            return views, journal, landed
    pytest.fail(f"the run did not complete in {gen + 1} processes")


@pytest.mark.timeout(900)
@pytest.mark.parametrize("seed", SEEDS)
def test_sigkill_at_random_points_repeats_no_completed_call(
    reference: View, seed: int, tmp_path: Path
) -> None:
    run_id = f"oa-crash-{seed}"
    views, journal, landed = run_scenario(tmp_path, run_id, random.Random(seed), reference)
    counts = check_no_repeats(views, journal)
    final = views[-1]
    print(f"KILLS {run_id} kills={landed} processes={len(views) - 1} {counts} repeated completed=0")
    assert landed >= 1, "no kill landed"
    assert final.status == "completed" and final.answer == reference.answer
    assert collapsed(final.started) == reference.started  # a rerun call starts again in place
    assert [name for _, name in final.completed] == [name for _, name in reference.completed]


@pytest.mark.timeout(600)
def test_a_handoff_survives_a_kill(reference: View, tmp_path: Path) -> None:
    handoff = [seq for seq, name in reference.completed if name.endswith(":triage")][-1]
    views, journal, landed = run_scenario(tmp_path, "oa-handoff", [("after", handoff)], reference)
    assert landed == 1
    assert [name for _, name in views[1].completed][-1] == "openai_agents.model:triage"
    later = [kind for gen, kind, _ in calls(journal) if gen >= 1]
    assert later[0] == "model:refunds", f"the run did not continue with refunds: {later}"
    assert "model:triage" not in later and "tool:lookup_order" not in later
    check_no_repeats(views, journal)
    assert views[-1].answer == reference.answer


@pytest.mark.timeout(900)
@pytest.mark.parametrize("seed", SEEDS)
def test_sigkill_an_agent_workflow_keeps_one_step_per_agent_segment(
    segments_reference: View, seed: int, tmp_path: Path
) -> None:
    run_id = f"oa-segments-{seed}"
    views, journal, landed = run_scenario(
        tmp_path, run_id, random.Random(seed), segments_reference, segments=True
    )
    counts = check_no_repeats(views, journal)
    final = views[-1]
    print(f"KILLS {run_id} kills={landed} processes={len(views) - 1} {counts} repeated completed=0")
    assert landed >= 1, "no kill landed"
    assert final.status == "completed" and final.answer == segments_reference.answer
    assert final.answer == "done: refunded 500 on order 42"
    assert [name for _, name in final.completed] == [
        name for _, name in segments_reference.completed
    ]
    assert collapsed(final.started) == segments_reference.started
    assert final.steps == ["triage", "refunds"]  # one step per agent segment, none twice


@pytest.mark.timeout(600)
def test_an_agent_workflow_killed_after_the_handoff_step_runs_refunds_only(
    segments_reference: View, tmp_path: Path
) -> None:
    handoff = [seq for seq, name in segments_reference.completed if name.endswith(":triage")][-1]
    views, journal, landed = run_scenario(
        tmp_path, "oa-seg-handoff", [("after", handoff)], segments_reference, segments=True
    )
    assert landed == 1
    later = [kind for gen, kind, _ in calls(journal) if gen >= 1]
    assert later[0] == "model:refunds", f"the run did not continue with refunds: {later}"
    assert "model:triage" not in later and "tool:lookup_order" not in later
    check_no_repeats(views, journal)
    assert views[-1].steps == ["triage", "refunds"]
    assert views[-1].answer == segments_reference.answer
