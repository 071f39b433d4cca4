"""``agentlog worker`` given bad input, or stopped mid-step, as a real process.

* An ``--app`` that cannot be imported (no such module, no such file, code
  that raises while loading, a missing attribute): exit code 2, a message
  that says what was wrong and what to write, and nothing recorded.
* A run of a workflow the worker does not know: the worker leaves it alone
  (and says so on its log) while it drives the runs it knows; a worker
  started with the right ``--app`` completes it.
* SIGTERM while runs are mid-step: the worker exits 0, each run's current
  step is recorded and its lease released, and a new worker finishes the
  runs without executing again any step whose StepCompleted was recorded.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agentlog.eventlog.events import RunStatus, StepCompleted, WriterClaimed, utcnow
from agentlog.runtime import Runtime
from tests.crash.worker import child_env
from tests.fleet import app
from tests.support.fleet import REPO, Dedup, Fleet, history, types, until

pytestmark = pytest.mark.fleet

SLOW_RUNS = 6


def _worker(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentlog", "worker", *args],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,  # a hang guard: a bad --app must fail at once, not serve
    )


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("no_such_module_xyz:workflows", "no module 'no_such_module_xyz'"),
        ("tests.fleet.no_such_module:workflows", "no module 'tests.fleet.no_such_module'"),
        ("missing/agents.py:workflows", "there is no file missing/agents.py"),
        ("tests.fleet.app:nope", "has no 'nope'"),
        ("tests.fleet.app", "missing the attribute after ':'"),
        ("BROKEN:workflows", "your code raised RuntimeError while loading: broken on purpose"),
        ("tests.fleet.app:BRANCHES", "not a Workflow or a list of Workflows"),
    ],
)
def test_an_app_that_cannot_be_loaded_exits_2_and_says_why(
    spec: str, says: str, tmp_path: Path
) -> None:
    broken = tmp_path / "broken_agents.py"
    broken.write_text("raise RuntimeError('broken on purpose')\n")
    spec = spec.replace("BROKEN", str(broken))
    db = tmp_path / "never.db"
    done = _worker("--app", spec, "--log", f"sqlite:///{db}")
    assert done.returncode == 2, done.stderr
    message = " ".join(done.stderr.split())  # the console wraps long lines
    assert says in message, message
    assert "Traceback" not in done.stderr
    assert done.stdout == ""  # it never said it drives anything
    assert not db.exists(), "a worker that could not load its app opened the log"


async def test_a_run_of_an_unknown_workflow_waits_for_a_worker_that_knows_it(
    fleet: Fleet, client: Runtime, dedup: Dedup
) -> None:
    knows_others = fleet.start()  # knows fleet, nap, sleeper, slow: not orphan
    await client.submit(app.orphan, run_id="orphan", input={})
    await client.submit(app.sleeper, run_id="known", input={"seconds": 0.1})

    async def known_completed() -> bool:
        info = await client.log.find_run("known")
        return info is not None and info.status == RunStatus.COMPLETED

    async def said_so() -> bool:
        text = knows_others.stderr.read_text()
        return "run waits for a worker that knows its workflow" in text and "orphan" in text

    await until(known_completed, "the worker completed the run it knows", 120)
    await until(said_so, "the worker said the orphan run waits for another worker", 60)
    # It passed over the orphan run (older than the known one) and left it alone.
    assert types(await history(client.log, "orphan")) == ["RunStarted"]
    info = await client.log.get_run("orphan")
    assert info.status == RunStatus.RUNNING and info.lease_expires_at is None
    assert dedup.rows("SELECT * FROM deliveries WHERE run = 'orphan'") == []

    knows_orphan = fleet.start(apps="tests.fleet.app:others")

    async def orphan_completed() -> bool:
        return (await client.log.get_run("orphan")).status == RunStatus.COMPLETED

    await until(orphan_completed, "the worker that knows the workflow completed it", 120)
    events = await history(client.log, "orphan")
    claims = [e.data.owner for e in events if isinstance(e.data, WriterClaimed)]
    assert claims == [knows_orphan.ready_line.split()[1]]
    assert dedup.rows("SELECT gen FROM deliveries WHERE run = 'orphan'") == [(knows_orphan.pid,)]
    assert knows_others.proc.poll() is None  # it kept serving all along


async def test_sigterm_mid_step_records_the_step_hands_over_and_exits_0(
    fleet: Fleet, client: Runtime, dedup: Dedup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = tmp_path / "gate"
    monkeypatch.setenv("FLEET_GATE", str(gate))  # the workers inherit it
    first = fleet.start()
    run_ids = [f"slow-{i}" for i in range(SLOW_RUNS)]
    for run_id in run_ids:
        await client.submit(app.slow, run_id=run_id, input={})

    async def all_mid_step() -> bool:
        # Each run's first effect was delivered: its step now waits on the gate.
        rows = dedup.rows("SELECT DISTINCT run FROM deliveries WHERE arg = 'one'")
        return len(rows) == SLOW_RUNS

    await until(all_mid_step, "every run is inside its first step", 120, 0.05)
    first.proc.send_signal(signal.SIGTERM)
    gate.touch()  # the steps in flight can finish now
    assert first.proc.wait(timeout=120) == 0, first.log_tail()
    assert "its runs are handed over" in first.proc.communicate(timeout=30)[0]

    # Every step the stopped worker began is recorded, and it let go of every run.
    recorded: dict[str, set[tuple[str, int, int]]] = {}
    now = utcnow()
    for run_id in run_ids:
        events = await history(client.log, run_id)
        recorded[run_id] = {
            (e.data.step, e.data.superstep, e.data.branch)
            for e in events
            if isinstance(e.data, StepCompleted)
        }
        began = dedup.rows(
            "SELECT step, superstep, branch FROM steps WHERE run = ? AND gen = ?",
            run_id,
            first.pid,
        )
        assert began and set(began) <= recorded[run_id], (
            f"{run_id}: steps in flight at SIGTERM {began}, recorded {recorded[run_id]}"
        )
        info = await client.log.get_run(run_id)
        assert info.status == RunStatus.RUNNING, f"{run_id} went on to {info.status}"
        assert info.lease_expires_at is None or info.lease_expires_at <= now, (
            f"{run_id}: the stopped worker did not let go of the run"
        )

    second = fleet.start()

    async def all_completed() -> bool:
        infos = await client.log.list_runs(status=RunStatus.COMPLETED)
        return len(infos) == SLOW_RUNS

    await until(all_completed, "the new worker finished every run", 180)
    for run_id in run_ids:
        state = await client.get_state(run_id)
        assert state.values["done"] == [f"work({s})" for s in app.SLOW_STEPS]
        executed = dedup.rows(
            "SELECT gen, step, superstep, branch FROM steps WHERE run = ?", run_id
        )
        for gen, step, superstep, branch in executed:
            if gen == second.pid:
                assert (step, superstep, branch) not in recorded[run_id], (
                    f"{run_id}: step {step} ran again although its StepCompleted was recorded"
                )
        assert sorted(step for _, step, _, _ in executed) == sorted(app.SLOW_STEPS), executed
        keys = dedup.rows("SELECT key FROM deliveries WHERE run = ?", run_id)
        assert len(keys) == len(set(keys)) == len(app.SLOW_STEPS), "an effect ran twice"
