"""Logging: the library is quiet unless configured; the CLI configures it. Entry points."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import agentlog

SRC = Path(agentlog.__file__).resolve().parents[1]
REPO = SRC.parent

LIBRARY_USE = """
import asyncio, logging, sys
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.runtime import RetryPolicy, Runtime, StepContext, Workflow, end

if sys.argv[1:] == ["configured"]:
    logging.basicConfig(level=logging.INFO)

wf = Workflow(
    "quiet", state={"n": "replace"}, retry=RetryPolicy(max_attempts=2, initial_interval=0)
)

@wf.step
async def flaky(ctx: StepContext):
    if ctx.attempt == 1:
        raise RuntimeError("first try fails")
    return end(n=1)

async def main():
    async with Runtime(MemoryEventLog(), workflows=[wf]) as rt:
        await rt.start(wf, run_id="q")
        state = await rt.wait("q")
        assert state.status == "completed", state.status

asyncio.run(main())
"""


def _python(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(REPO)])}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.process
def test_library_use_prints_nothing(tmp_path: Path) -> None:
    script = tmp_path / "use.py"
    script.write_text(LIBRARY_USE)
    quiet = _python(str(script), cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert (quiet.stdout, quiet.stderr) == ("", "")
    # the same run does log (a failed attempt) once the application asks for it
    configured = _python(str(script), "configured", cwd=tmp_path)
    assert configured.returncode == 0, configured.stderr
    assert "step failed" in configured.stderr and configured.stdout == ""


@pytest.mark.process
def test_cli_verbose_json_logs_go_to_stderr(log_url: str) -> None:
    args = ["resume", "r1", "--value", "true", "--log", log_url]
    args += ["--app", "tests.cli.cli_workflows:workflows"]
    result = _python("-m", "agentlog", "-v", "--log-format", "json", *args)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("run r1: completed at seq ")
    lines = [json.loads(line) for line in result.stderr.splitlines()]
    assert lines and all({"event", "level", "timestamp"} <= set(line) for line in lines)
    assert {"info"} <= {line["level"] for line in lines}
    assert any(line["event"] == "run stopped" for line in lines)


@pytest.mark.process
def test_cli_without_v_logs_no_info(log_url: str) -> None:
    args = ["resume", "r1", "--value", "true", "--log", log_url]
    result = _python("-m", "agentlog", *args, "--app", "tests.cli.cli_workflows:workflows")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "completed" in result.stdout


@pytest.mark.process
def test_version_and_python_dash_m() -> None:
    result = _python("-m", "agentlog", "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"agentlog {agentlog.__version__}"
    helped = _python("-m", "agentlog", "--help")
    assert helped.returncode == 0 and "Usage: agentlog" in helped.stdout
    for name in ("runs", "show", "state", "diff", "resume", "recover", "archive", "sql"):
        assert name in helped.stdout
