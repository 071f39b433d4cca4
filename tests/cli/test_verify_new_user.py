"""``agentlog verify`` as a new user runs it (issue 19): on the shipped example,
on a plain ``asyncio.gather``, on the demo without ``--app``, on archived runs,
on a task whose policy gave up on the app's own ``non_retryable`` error.

The examples run as real processes and ``agentlog verify`` as a real command
(``python -m agentlog``), from a fresh folder, so the defaults (``--archive``,
the demo's workflow) are the ones a user gets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import agentlog
from agentlog.cli import app

SRC = Path(agentlog.__file__).resolve().parents[1]
REPO = SRC.parent
SUPPORT_AGENT = REPO / "examples" / "support_agent.py"

runner = CliRunner()

#: A user's own agent: searches side by side with a plain asyncio.gather, one
#: of them flaky (retried by its policy); then a step whose first attempt
#: fails after a task that failed (recorded failures, replayed by verify).
USER_APP = """
import asyncio, sys
from agentlog.runtime import RetryPolicy, Runtime, StepContext, Workflow, end, goto, task

GATHER = "SHAPE" == "gather"  # the test writes gather or sequential here
b_started = asyncio.Event()
tries = {"flaky": 0}

@task(name="search")
async def search(q: str) -> str:
    b_started.set()
    return f"hit {q}"

@task(name="flaky", retry=RetryPolicy(max_attempts=3, initial_interval=0.001))
async def flaky(q: str) -> str:
    tries["flaky"] += 1
    await b_started.wait()
    if tries["flaky"] == 1:
        raise ConnectionError("the service flaked")
    return f"ok {q}"

@task(name="broken")
async def broken() -> str:
    raise ValueError("the mailer is down")

wf = Workflow(
    "user-agent",
    state={"notes": "append", "out": "replace"},
    retry=RetryPolicy(max_attempts=2, initial_interval=0.001),
)

@wf.step
async def research(ctx: StepContext):
    if GATHER:
        hits = await asyncio.gather(flaky("a"), search("b"))
    else:
        hits = [await search("b"), await flaky("a")]
    return goto("report", notes=sorted(hits))

@wf.step
async def report(ctx: StepContext):
    if ctx.attempt == 1:
        try:
            await broken()
        except ValueError:
            pass
        raise RuntimeError("first attempt fails")
    return end(out="done")

async def main(url: str) -> None:
    async with await Runtime.open(url, workflows=[wf]) as rt:
        await rt.start(wf, run_id="u1", durability="sync")
        assert (await rt.wait("u1", timeout=60)).status == "completed"

if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
"""

#: A billing agent whose task fails with the app's own error, which its retry
#: policy lists as non_retryable: one run falls back on ``except QuotaGone``,
#: the other lets it fail the run. The test writes the task's name for TASK.
BILLING_APP = """
import asyncio, sys
from agentlog.runtime import RetryPolicy, Runtime, StepContext, Workflow, end, task

class QuotaGone(Exception):
    \"\"\"The billing API says no: trying again changes nothing.\"\"\"

tries = []

@task(name="TASK", retry=RetryPolicy(initial_interval=0.001, non_retryable=(QuotaGone,)))
async def charge(cents: int) -> str:
    tries.append(cents)
    raise QuotaGone("no quota left this month")

wf = Workflow(
    "billing",
    state={"plan": "replace", "receipt": "replace"},
    retry=RetryPolicy(max_attempts=3, initial_interval=0.001),
)

@wf.step
async def pay(ctx: StepContext):
    if ctx.state["plan"] == "strict":
        return end(receipt=await charge(500))  # not caught: the run fails
    try:
        return end(receipt=await charge(500))
    except QuotaGone:
        return end(receipt="invoice later")  # the fallback

async def main(url: str) -> None:
    async with await Runtime.open(url, workflows=[wf]) as rt:
        for plan, status in (("lenient", "completed"), ("strict", "failed")):
            await rt.start(wf, run_id=plan, input={"plan": plan}, durability="sync")
            assert (await rt.wait(plan, timeout=60)).status == status
    assert tries == [500, 500], tries  # its policy gave up at once, in each run

if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
"""


def _python(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(REPO)])}
    env.pop("AGENTLOG_ARCHIVE", None)
    env.pop("AGENTLOG_LOG", None)
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def _verify(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _python("-m", "agentlog", "verify", "--runs", "all", "--json", *args, cwd=cwd)


def _verdicts(done: subprocess.CompletedProcess[str]) -> list[tuple[str, str]]:
    return [(r["run_id"], r["status"]) for r in json.loads(done.stdout)["runs"]]


@pytest.mark.process
def test_the_support_example_verifies_clean(tmp_path: Path) -> None:
    """The issue's steps: run the example, then verify it on its unchanged code."""
    ran = _python(str(SUPPORT_AGENT), str(tmp_path), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    log = f"sqlite:///{tmp_path / 'support.db'}"
    done = _verify(tmp_path, "--app", f"{SUPPORT_AGENT}:wf", "--log", log)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _verdicts(done) == [("ticket-42", "matched")]
    assert done.stderr == ""


@pytest.mark.process
@pytest.mark.parametrize("shape", ["gather", "sequential"])
def test_a_users_agent_with_recorded_failures_verifies_clean_and_quietly(
    tmp_path: Path, shape: str
) -> None:
    """Plain asyncio.gather (one task retried while its sibling ran), a task that
    failed and a step attempt that failed: matched, and nothing on stderr."""
    (tmp_path / "user_agent.py").write_text(USER_APP.replace("SHAPE", shape))
    log = f"sqlite:///{tmp_path / 'agent.db'}"
    ran = _python("user_agent.py", log, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    done = _verify(tmp_path, "--app", "user_agent:wf", "--log", log)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _verdicts(done) == [("u1", "matched")]
    assert done.stderr == ""  # the replayed failures are the history's, not warnings


@pytest.mark.process
def test_the_demo_verifies_without_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--help says the demo's workflow is always known: verify needs no --app for it."""
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    demo = runner.invoke(app, ["demo", "--log", url, "--run-id", "demo-test"])
    assert demo.exit_code == 0, demo.output
    result = runner.invoke(app, ["verify", "--log", url, "--runs", "all", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [(r["run_id"], r["status"]) for r in report["runs"]] == [("demo-test", "matched")]
    assert result.stderr == ""  # its flaky search failed once: replayed, not a warning


@pytest.mark.process
def test_an_archived_run_verifies_through_the_default_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verify reads archived runs as show and runs do (same default --archive);
    when that archive is not there, the hint names verify's own option."""
    ran = _python(str(SUPPORT_AGENT), str(tmp_path), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTLOG_ARCHIVE", raising=False)
    log = f"sqlite:///{tmp_path / 'support.db'}"
    archived = runner.invoke(app, ["archive", "--log", log, "--run", "ticket-42"])
    assert archived.exit_code == 0, archived.output
    args = ["verify", "--app", f"{SUPPORT_AGENT}:wf", "--log", log, "--runs", "all", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["runs"][0]["status"] == "matched"
    elsewhere = runner.invoke(app, [*args, "--archive", f"file://{tmp_path / 'nowhere'}"])
    assert elsewhere.exit_code == 1, elsewhere.output
    [run] = json.loads(elsewhere.stdout)["runs"]
    [divergence] = run["divergences"]
    assert divergence["kind"] == "history"
    assert "agentlog verify --archive" in divergence["message"]
    assert "agentlog show" not in divergence["message"]


@pytest.mark.process
def test_a_custom_non_retryable_error_verifies_clean_and_a_renamed_task_diverges(
    tmp_path: Path,
) -> None:
    """A task's policy gave up on the app's own error (caught by the step in one
    run, failing the other): verify follows that verdict. Matched, exit 0,
    nothing on stderr; the task renamed is still a divergence, exit 1."""
    app_file = tmp_path / "billing.py"
    app_file.write_text(BILLING_APP.replace("TASK", "charge"))
    log = f"sqlite:///{tmp_path / 'billing.db'}"
    ran = _python("billing.py", log, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    done = _verify(tmp_path, "--app", "billing:wf", "--log", log)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(_verdicts(done)) == [("lenient", "matched"), ("strict", "matched")]
    assert done.stderr == ""
    app_file.write_text(BILLING_APP.replace("TASK", "charge_card"))
    changed = _verify(tmp_path, "--app", "billing:wf", "--log", log)
    assert changed.returncode == 1, changed.stdout + changed.stderr
    runs = json.loads(changed.stdout)["runs"]
    assert sorted((r["run_id"], r["status"]) for r in runs) == [
        ("lenient", "diverged"),
        ("strict", "diverged"),
    ]
    for run in runs:
        [divergence] = run["divergences"]
        assert divergence["kind"] == "task"
        assert "charge_card" in divergence["message"], divergence
