"""Without OpenTelemetry installed, nothing of it is imported and runs work as ever.

``opentelemetry-api`` is in the dev environment (Pydantic AI pulls it in), so
a child process hides it (``sys.modules["opentelemetry"] = None``, which
makes every import of it fail as if it were not installed) before agentlog
is imported, then runs a workflow with a task, an interrupt and a resume.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentlog.otel import OpenTelemetry
from agentlog.runtime import Runtime, RuntimeConfig
from agentlog.runtime._telemetry import NO_TELEMETRY

HIDDEN = """
import asyncio, sys
sys.modules["opentelemetry"] = None  # not installed, as far as imports go
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end, task
from agentlog.runtime._telemetry import NO_TELEMETRY

wf = Workflow("plain", state={"paid": "replace", "ok": "replace"})

@task
async def pay() -> str:
    return "paid"

@wf.step(then="ask")
async def charge(ctx: StepContext) -> dict[str, str]:
    return {"paid": await pay()}

@wf.step
async def ask(ctx: StepContext) -> object:
    return end(ok=ctx.interrupt("ok?"))

async def main() -> None:
    config = RuntimeConfig(worker=False, lease_seconds=0.3)
    async with await Runtime.open(sys.argv[1], workflows=[wf], config=config) as rt:
        assert rt.driver.telemetry is NO_TELEMETRY
        await rt.start(wf, run_id="r")
        await rt.wait("r")
        await rt.resume("r", True)
        state = await rt.wait("r")
    loaded = sorted(m for m in sys.modules if m.startswith(("opentelemetry", "agentlog.otel")))
    print(state.status, state.values, "limits" , sorted(state.limits), loaded)

asyncio.run(main())
"""


@pytest.mark.process
def test_without_opentelemetry_nothing_is_imported_and_runs_work(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'log.db'}"
    done = subprocess.run(
        [sys.executable, "-c", HIDDEN, url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == ""  # quiet: no warning about a missing package
    # Only the blocker's own None entry: no module of OpenTelemetry or agentlog.otel loaded,
    # and no trace stored in the run.
    assert done.stdout.strip() == (
        "completed {'paid': 'paid', 'ok': True} limits ['max_steps'] ['opentelemetry']"
    )


async def test_with_opentelemetry_installed_auto_uses_it_and_off_does_not(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'log.db'}"
    async with await Runtime.open(url, config=RuntimeConfig(worker=False)) as rt:
        assert isinstance(rt.driver.telemetry, OpenTelemetry)
    off = RuntimeConfig(worker=False, telemetry="off")
    async with await Runtime.open(url, config=off) as rt:
        assert rt.driver.telemetry is NO_TELEMETRY
