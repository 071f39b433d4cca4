"""``ctx.patched(id)``: versioning in code (issue 24, item 5).

A run recorded under code without the patch takes the old path when new
code resumes it; a new run takes the new path; ``verify`` passes for both,
under the code that wrote them and under the code that replaced them.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest

from agentlog.errors import RunFailedError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunStatus, TaskStarted
from agentlog.replay import verify_history
from agentlog.runtime import Runtime, StepContext, Workflow, end
from tests.support.runtime import Calls, config, event_log, events_of, run_to_rest

__all__ = ["event_log"]

Code = Literal["old", "patched", "deprecated"]
MARKER = "agentlog.patched:fix-42"


def shop(calls: Calls, code: Code) -> Workflow:
    """lookup -> charge (old) or charge.v2 (patched) -> approval -> end."""
    wf = Workflow("shop", state={"path": "replace", "late": "replace", "ok": "replace"})

    @wf.step
    async def pay(ctx: StepContext) -> Any:
        await ctx.task("lookup", lambda: calls.hit("lookup"))
        if code == "old":
            path = "old"
        elif code == "deprecated":
            ctx.deprecate_patch("fix-42")
            path = "new"
        else:
            path = "new" if ctx.patched("fix-42") else "old"
        await ctx.task("charge.v2" if path == "new" else "charge", lambda: calls.hit(path))
        ok = ctx.interrupt("ship it?", expects=bool)
        late = None if code == "old" else ctx.patched("fix-43")  # a patch past the interrupt
        return end(path=path, late=late, ok=ok)

    return wf


async def _park(log: EventLog, wf: Workflow, run_id: str) -> None:
    async with Runtime(log, workflows=[wf], config=config("writer")) as rt:
        await rt.start(wf, run_id=run_id, durability="sync")
        assert (await run_to_rest(rt, run_id)).status == RunStatus.WAITING


async def _answer(log: EventLog, wf: Workflow, run_id: str) -> dict[str, Any]:
    async with Runtime(log, workflows=[wf], config=config("resumer")) as rt:
        await rt.resume(run_id, True)
        state = await run_to_rest(rt, run_id)
    assert state.status == RunStatus.COMPLETED, state.error
    return dict(state.values)


async def _markers(log: EventLog, run_id: str) -> list[str]:
    return [
        e.data.name
        for e in await events_of(log, run_id)
        if isinstance(e.data, TaskStarted) and e.data.name.startswith("agentlog.patched:")
    ]


async def test_an_old_run_resumed_under_patched_code_takes_the_old_path(
    event_log: EventLog,
) -> None:
    calls = Calls()
    await _park(event_log, shop(calls, "old"), "old-run")
    values = await _answer(event_log, shop(calls, "patched"), "old-run")
    # fix-42's point was passed without the patch; fix-43's was not reached yet
    assert values == {"path": "old", "late": True, "ok": True}
    assert calls.count["old"] == 1 and calls.count["new"] == 0
    assert await _markers(event_log, "old-run") == ["agentlog.patched:fix-43"]
    history = await events_of(event_log, "old-run")
    assert await verify_history(shop(Calls(), "patched"), history) == []


async def test_a_new_run_takes_the_new_path_on_every_execution(event_log: EventLog) -> None:
    calls = Calls()
    await _park(event_log, shop(calls, "patched"), "new-run")
    values = await _answer(event_log, shop(calls, "patched"), "new-run")  # the step runs again
    assert values == {"path": "new", "late": True, "ok": True}
    assert calls.count["new"] == 1 and calls.count["old"] == 0 and calls.count["lookup"] == 1
    assert await _markers(event_log, "new-run") == [MARKER, "agentlog.patched:fix-43"]
    history = await events_of(event_log, "new-run")
    assert await verify_history(shop(Calls(), "patched"), history) == []
    assert await verify_history(shop(Calls(), "deprecated"), history) == []


async def test_deprecate_patch_resumes_a_run_with_the_marker(event_log: EventLog) -> None:
    calls = Calls()
    await _park(event_log, shop(calls, "patched"), "run")
    values = await _answer(event_log, shop(calls, "deprecated"), "run")
    assert values == {"path": "new", "late": True, "ok": True}
    assert calls.count["new"] == 1 and calls.count["lookup"] == 1  # no task ran again
    assert await _markers(event_log, "run") == [MARKER, "agentlog.patched:fix-43"]


async def test_a_patch_id_must_be_a_string(event_log: EventLog) -> None:
    wf = Workflow("bad-patch", state={"ok": "replace"})

    @wf.step
    async def only(ctx: StepContext) -> Any:
        return end(ok=ctx.patched(""))

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="b", durability="sync")
        with pytest.raises(RunFailedError, match="a patch id must be a non-empty string"):
            await run_to_rest(rt, "b")
    assert await _markers(event_log, "b") == []
