"""``agentlog recover`` right after a crash, and with LangGraph threads in the log.

A dead writer's lease lives on until it runs out, so right after a crash
``recover`` cannot take the run yet: it must name the run, its writer and
when the lease ends, and ``--wait`` must wait for that and then recover it.
The lease here is one the test holds for a writer that is gone (it never
renews it); the test ends it (as running out would) only once the waiting
command said it waits, so nothing depends on how fast the machine is.
"""

from __future__ import annotations

import asyncio
import re
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentlog.cli import app
from agentlog.eventlog.events import LANGGRAPH_WORKFLOW, RunStatus, utcnow
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end
from tests.cli.cli_workflows import parked_workflow
from tests.crash.worker import child_env
from tests.support.lg_threads import run_thread
from tests.support.stream_driver import BOUND_SECONDS

runner = CliRunner()
APP = ["--app", "tests.cli.cli_workflows:workflows"]
REPO = Path(__file__).resolve().parents[2]
#: The dead writer's lease: far longer than any test, so it never runs out by itself.
LEASE_S = 600.0


def _held_by_a_dead_writer(db: Path) -> None:
    """Run ``g`` of the CLI's parked workflow, recorded and held by a writer that is gone."""

    async def build() -> None:
        wf = parked_workflow()
        client = RuntimeConfig(owner="client", execute=False, worker=False)
        async with Runtime(SqliteEventLog(db), workflows=[wf], config=client) as rt:
            await rt.submit(wf, run_id="g", durability="sync")
            await rt.log.claim_writer("g", owner="dead-worker", lease_seconds=LEASE_S, force=False)

    asyncio.run(build())


def test_recover_skips_langgraph_threads_and_no_worker_drives_one(tmp_path: Path) -> None:
    db = tmp_path / "lg.db"
    run_thread(db, "t1", answer=True)  # a thread LangGraph left running, no lease

    async def thread_status() -> str:
        async with SqliteEventLog(db) as log:
            info = await log.get_run("t1")
            assert info.workflow == LANGGRAPH_WORKFLOW and not info.lease_owner
            return info.status

    assert asyncio.run(thread_status()) == RunStatus.RUNNING
    result = runner.invoke(app, ["recover", "--log", f"sqlite:///{db}", "--json"])
    assert result.exit_code == 0, result.output
    assert '"recovered": []' in result.stdout and '"failed": {}' in result.stdout
    assert "langgraph" not in result.output

    # A worker never takes one either, even one whose code has that name.
    impostor = Workflow(LANGGRAPH_WORKFLOW, state={"x": "replace"})

    @impostor.step
    async def only(ctx: StepContext) -> object:
        return end(x=1)

    async def worker_pass() -> tuple[list[str], int]:
        config = RuntimeConfig(worker=False)
        async with Runtime(SqliteEventLog(db), workflows=[impostor], config=config) as rt:
            taken = await rt.worker.run_once()
            report = await rt.recover()
            return taken, len(report.recovered) + len(report.failed)

    assert asyncio.run(worker_pass()) == ([], 0)
    assert asyncio.run(thread_status()) == RunStatus.RUNNING


def test_recover_names_a_run_a_dead_writers_lease_still_holds(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    _held_by_a_dead_writer(db)
    before = utcnow()
    result = runner.invoke(app, ["recover", "--log", f"sqlite:///{db}", *APP])
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())  # the console may wrap long lines
    found = re.search(
        r"run g not recovered yet: writer 'dead-worker' holds its lease until "
        r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC \(in (\d+) s\).*recover --wait",
        text,
    )
    assert found, text
    until = before.strftime("%Y-%m-%d %H:%M:%S")
    latest = (utcnow() + timedelta(seconds=LEASE_S)).strftime("%Y-%m-%d %H:%M:%S")
    assert until <= found.group(1) <= latest
    assert 0 < int(found.group(2)) <= LEASE_S
    assert "recovered 0 run(s)" in text
    as_json = runner.invoke(app, ["recover", "--log", f"sqlite:///{db}", "--json", *APP])
    assert as_json.exit_code == 0, as_json.output
    assert '"writer": "dead-worker"' in as_json.stdout and '"run_id": "g"' in as_json.stdout


@pytest.mark.process
async def test_recover_wait_shows_progress_then_recovers_when_the_lease_ends(
    tmp_path: Path,
) -> None:
    db = tmp_path / "log.db"
    await asyncio.to_thread(_held_by_a_dead_writer, db)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *["-m", "agentlog", "recover", "--wait", "--log", f"sqlite:///{db}", *APP],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=child_env(),
        cwd=REPO,
    )
    try:
        assert proc.stderr is not None and proc.stdout is not None
        async with asyncio.timeout(BOUND_SECONDS):
            progress = (await proc.stderr.readline()).decode()
        assert progress.startswith("waiting for 1 lease(s) to end: g in "), progress
        async with SqliteEventLog(db) as log:  # the lease runs out: it ends now
            info = await log.get_run("g")
            assert info.lease_owner == "dead-worker"
            await log.release_lease("g", info.writer_epoch)
        async with asyncio.timeout(BOUND_SECONDS):
            out, rest = await proc.communicate()
        assert proc.returncode == 0, rest.decode()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    text = " ".join(out.decode().split())
    assert "run g not recovered yet: writer 'dead-worker'" in text
    assert re.search(r"run g: waiting at seq \d+", text), text  # driven on to its question
    assert text.endswith("recovered 1 run(s)"), text
    async with SqliteEventLog(db) as log:
        assert (await log.get_run("g")).status == RunStatus.WAITING
