"""The failure modes of the pattern article (shared/seed/), one test each."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agentlog.errors import ConfigError, UnknownRunError, VersionMismatchError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunStatus
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime, StepContext, Workflow, end, goto
from tests.support.runtime import Calls, config, event_log, run_to_rest, types_of

__all__ = ["event_log"]

REPO = Path(__file__).resolve().parents[2]


# 01: side effects placed before an interrupt call
async def test_side_effect_before_interrupt_runs_once_when_wrapped(event_log: EventLog) -> None:
    calls = Calls()
    wf = Workflow("checkout", state={"charged": "replace", "approved": "replace"})

    def charge_card(amount: int, idempotency_key: str) -> str:
        calls.hit("charge_card", idempotency_key)
        return f"charged {amount}"

    def raw_charge() -> None:
        calls.hit("raw (unwrapped) charge")

    @wf.step
    async def pay_then_ask(ctx: StepContext) -> Any:
        raw_charge()  # the naive placement: re-runs on resume
        receipt = await ctx.task("charge", charge_card, 100)  # the fix: recorded, runs once
        approved = ctx.interrupt({"receipt": receipt}, expects="bool")
        return end(charged=receipt, approved=approved)

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="c", durability="sync")
        assert (await run_to_rest(rt, "c")).status == RunStatus.WAITING
        await rt.resume("c", True)
        final = await run_to_rest(rt, "c")
    assert final.values == {"charged": "charged 100", "approved": True}
    assert calls.count["charge_card"] == 1
    assert calls.count["raw (unwrapped) charge"] == 2  # what the article warns about


# 06: missing or non-stable run identifier
async def test_run_id_is_required_and_decides_which_run_continues(event_log: EventLog) -> None:
    wf = Workflow("ask", state={"answer": "replace"})

    @wf.step
    async def ask(ctx: StepContext) -> Any:
        return end(answer=ctx.interrupt("?"))

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        with pytest.raises(TypeError):
            await rt.start(wf)  # type: ignore[call-arg]  # no silent fresh id
        with pytest.raises(ConfigError, match="explicit, stable run_id"):
            await rt.start(wf, run_id="")
        await rt.start(wf, run_id="ticket-1", durability="sync")
        await run_to_rest(rt, "ticket-1")
        await rt.start(wf, run_id="ticket-2", durability="sync")  # another id: another run
        await run_to_rest(rt, "ticket-2")
        # the same id again continues the parked run, it does not fork a new one
        await rt.start(wf, run_id="ticket-1", durability="sync")
        assert (await run_to_rest(rt, "ticket-1")).status == RunStatus.WAITING
        await rt.resume("ticket-1", "yes")
        assert (await run_to_rest(rt, "ticket-1")).values == {"answer": "yes"}
    runs = {r.run_id: r.status for r in await event_log.list_runs()}
    assert runs == {"ticket-1": RunStatus.COMPLETED, "ticket-2": RunStatus.WAITING}
    assert (await types_of(event_log, "ticket-1")).count("RunStarted") == 1


# 05: resuming across a deploy that changed the state schema or graph shape
async def test_state_schema_changed_across_a_deploy(tmp_path: Path) -> None:
    def build(with_summary: bool) -> Workflow:
        state = {"draft": "replace"} | ({"summary": "replace"} if with_summary else {})
        wf = Workflow("report", version="1", state=state)

        @wf.step
        async def write(ctx: StepContext) -> Any:
            return goto("review", draft="d")

        @wf.step
        async def review(ctx: StepContext) -> Any:
            return end(draft=ctx.interrupt("ok?"))

        return wf

    url = f"sqlite:///{tmp_path / 'deploy.db'}"
    async with await Runtime.open(url, workflows=[build(False)], config=config("old")) as rt:
        await rt.start("report", run_id="r", durability="sync")
        await run_to_rest(rt, "r")
    # the deploy: same name and version string, but the state schema changed
    async with await Runtime.open(url, workflows=[build(True)], config=config("new")) as rt:
        with pytest.raises(VersionMismatchError, match="state schema"):
            await rt.resume("r", "fine")
        last = (await rt.log.get_run("r")).last_seq
        await rt.start("report", run_id="r")  # returns the parked run; records nothing
        info = await rt.log.get_run("r")
        assert info.status == RunStatus.WAITING and info.last_seq == last
    # the old code can still finish it
    async with await Runtime.open(url, workflows=[build(False)], config=config("old")) as rt:
        await rt.resume("r", "fine")
        assert (await run_to_rest(rt, "r")).values == {"draft": "fine"}


# "a resumed run continues the same step count"
async def test_step_limit_carries_across_resume(event_log: EventLog) -> None:
    wf = Workflow("agent-loop", state={"turns": "append"}, max_steps=4)

    @wf.step
    async def turn(ctx: StepContext) -> Any:
        n = len(ctx.state.get("turns", []))
        if n == 2:
            ctx.interrupt("keep going?")
        return goto("turn", turns=[n])

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="loop", durability="sync")
        parked = await run_to_rest(rt, "loop")
        assert parked.status == RunStatus.WAITING and parked.steps == 2
    # a fresh runtime (a new process after a deploy) resumes: the count is not reset
    async with Runtime(event_log, workflows=[wf], config=config("later")) as rt:
        await rt.resume("loop", "yes")
        final = await run_to_rest(rt, "loop")
    assert final.status == RunStatus.FAILED
    assert "StepLimitExceeded" in final.error and "4 of its 4" in final.error
    assert final.values["turns"] == [0, 1, 2, 3]


# 02: MemorySaver in production vs a database-backed log
_WORKER = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from agentlog.runtime import Runtime, RuntimeConfig
    from tests.runtime.test_failure_modes import survivor

    async def main():
        rt = await Runtime.open(sys.argv[1], workflows=[survivor()],
                               config=RuntimeConfig(owner="child", lease_seconds=5.0))
        await rt.start("survivor", run_id="s", durability="sync")
        await rt.wait("s")
        os.kill(os.getpid(), signal.SIGKILL)  # die hard, without closing anything

    asyncio.run(main())
    """
)


def survivor() -> Workflow:
    """One step, then an approval; used by the subprocess above."""
    wf = Workflow("survivor", state={"work": "replace", "ok": "replace"})

    @wf.step
    async def work(ctx: StepContext) -> Any:
        return goto("approve", work=await ctx.task("work", lambda: os.getpid()))

    @wf.step
    async def approve(ctx: StepContext) -> Any:
        return end(ok=ctx.interrupt("ok?"))

    return wf


@pytest.mark.process
async def test_sqlite_run_survives_process_death_memory_does_not(tmp_path: Path) -> None:
    path = tmp_path / "survive.db"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _WORKER,
        f"sqlite:///{path}",
        env=env,
        cwd=REPO,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(child.communicate(), 60)
    assert child.returncode == -9, stderr.decode()[-2000:]
    async with SqliteEventLog(path) as log, Runtime(log, workflows=[survivor()]) as rt:
        await rt.resume("s", True)
        final = await run_to_rest(rt, "s")
        assert final.status == RunStatus.COMPLETED
        assert final.values["ok"] is True
        assert final.values["work"] != os.getpid()  # recorded by the dead child
    # the same story on the in-memory log: a new process has nothing to resume
    async with MemoryEventLog() as memory, Runtime(memory, workflows=[survivor()]) as rt:
        with pytest.raises(UnknownRunError):
            await rt.resume("s", True)
