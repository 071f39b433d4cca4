"""``agentlog worker`` says which log it serves, and never creates one unasked.

A worker started in the wrong folder used to open ``.agentlog/agentlog.db``
there, create it empty and idle. It now refuses (exit code 2, naming the
absolute path it looked at) unless ``--create``, and names the log it
serves by its absolute path. A run of a workflow it was not given is named
with the CLI's way to load it (``--app``).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentlog.cli import app
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end
from tests.crash.worker import child_env
from tests.support.stream_driver import BOUND_SECONDS

runner = CliRunner()
APP = ["--app", "tests.cli.cli_workflows:workflows"]


def _start(*args: str, cwd: Path, stderr: Path) -> subprocess.Popen[str]:
    with open(stderr, "w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "agentlog", "worker", *args, "--poll", "0.05"],
            cwd=cwd,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )


def _stop(proc: subprocess.Popen[str]) -> int:
    """SIGTERM the worker and wait for it (bounded)."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=BOUND_SECONDS)  # reads and closes its stdout
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode


def _until_in(path: Path, text: str, proc: subprocess.Popen[str]) -> str:
    """Poll ``path`` until it holds ``text``; fail, saying what it holds, after the bound."""
    deadline = time.monotonic() + BOUND_SECONDS
    while text not in (held := " ".join(path.read_text().split())):
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the worker never wrote {text!r}; it wrote: {held}")
        time.sleep(0.05)
    return held


def test_worker_refuses_to_create_a_log_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the wrong folder: no log here
    result = runner.invoke(app, ["worker", *APP])  # the default sqlite:///.agentlog/agentlog.db
    said = " ".join(result.output.split())
    assert result.exit_code == 2, said
    assert f"no log at {tmp_path / '.agentlog' / 'agentlog.db'}" in said, said
    assert "--create" in said and "--log" in said
    assert not (tmp_path / ".agentlog").exists()  # nothing was created


@pytest.mark.process
def test_worker_with_create_names_the_new_log_by_its_absolute_path(tmp_path: Path) -> None:
    proc = _start(
        *APP, "--create", "--log", "sqlite:///fresh/new.db", cwd=tmp_path, stderr=tmp_path / "e"
    )
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        assert ready.rstrip().endswith(f" on {tmp_path / 'fresh' / 'new.db'}"), ready
        assert (tmp_path / "fresh" / "new.db").exists()
    finally:
        assert _stop(proc) == 0, (tmp_path / "e").read_text()


@pytest.mark.process
def test_worker_names_its_log_and_says_app_for_a_workflow_it_does_not_know(
    tmp_path: Path,
) -> None:
    stranger = Workflow("stranger", state={"n": "replace"})

    @stranger.step
    async def only(ctx: StepContext) -> object:
        return end(n=1)

    async def submit() -> None:
        client = RuntimeConfig(owner="client", execute=False, worker=False)
        async with Runtime(SqliteEventLog(tmp_path / "log.db"), config=client) as rt:
            await rt.submit(stranger, run_id="s")

    asyncio.run(submit())
    stderr = tmp_path / "worker.err"
    proc = _start(*APP, "--log", "sqlite:///log.db", cwd=tmp_path, stderr=stderr)  # relative
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        assert ready.rstrip().endswith(f" on {tmp_path / 'log.db'}"), ready
        warned = _until_in(stderr, "run waits for a worker that knows its workflow", proc)
        assert "--app module:attr" in warned and "Runtime(workflows" not in warned, warned
    finally:
        assert _stop(proc) == 0, stderr.read_text()
