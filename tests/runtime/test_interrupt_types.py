"""``ctx.interrupt(expects=...)`` takes Literal, Optional and unions; awaiting it fails at once.

Issue 24, item 6. What the type checkers see is pinned in tests/typechecks;
these tests pin what the runtime does with the same forms.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, Optional

import pytest

from agentlog.errors import InvalidResumeValueError, RunFailedError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunStatus
from agentlog.runtime import Runtime, StepContext, Workflow, end
from tests.support.runtime import config, event_log, run_to_rest, types_of

__all__ = ["event_log"]


@dataclasses.dataclass
class Refund:
    cents: int


async def test_expects_takes_literal_optional_and_unions(event_log: EventLog) -> None:
    wf = Workflow("choices", state={"verdict": "replace", "limit": "replace", "refund": "replace"})

    @wf.step(then="second")
    async def first(ctx: StepContext) -> Any:
        verdict = ctx.interrupt("ship it?", expects=Literal["yes", "no", 3])
        limit = ctx.interrupt("limit?", expects=int | None)
        return {"verdict": verdict, "limit": limit}

    @wf.step
    async def second(ctx: StepContext) -> Any:
        refund = ctx.interrupt("refund?", expects=Optional[Refund])  # noqa: UP045
        assert refund is None or isinstance(refund, Refund)  # built from the answer
        return end(refund=None if refund is None else refund.cents)

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="c", durability="sync")
        parked = await run_to_rest(rt, "c")
        assert parked.interrupts[0]["expects"] == ["literal", "yes", "no", 3]
        for wrong in ("maybe", True, 3.0, None):  # True == 1, 3.0 == 3: still not the literal
            with pytest.raises(InvalidResumeValueError, match="'yes' or 'no' or 3"):
                await rt.resume("c", wrong)
        await rt.resume("c", 3)
        parked = await run_to_rest(rt, "c")
        assert parked.interrupts[0]["expects"] == ["union", "int", "none"]
        for wrong in ("10", 1.5, False):
            with pytest.raises(InvalidResumeValueError, match="int or none"):
                await rt.resume("c", wrong)
        await rt.resume("c", None)
        parked = await run_to_rest(rt, "c")
        assert parked.status == RunStatus.WAITING  # the refused answers lost nothing
        with pytest.raises(InvalidResumeValueError, match="an object with keys"):
            await rt.resume("c", {"dollars": 5})
        await rt.resume("c", {"cents": 250})
        final = await run_to_rest(rt, "c")
    assert final.status == RunStatus.COMPLETED
    assert final.values == {"verdict": 3, "limit": None, "refund": 250}


async def test_an_awaited_interrupt_fails_at_once_before_the_run_parks(
    event_log: EventLog,
) -> None:
    wf = Workflow("awaits", state={"ok": "replace"})

    @wf.step
    async def ask(ctx: StepContext) -> Any:
        ok = await ctx.interrupt("ship it?", expects=bool)  # type: ignore[misc]
        return end(ok=ok)

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        await rt.start(wf, run_id="w", durability="sync")
        with pytest.raises(RunFailedError, match=r"awaits ctx\.interrupt"):
            await rt.wait("w", timeout=20)
    recorded = await types_of(event_log, "w")
    assert "InterruptRaised" not in recorded  # it never parked for a human
    assert recorded.count("StepFailed") == 1  # and was not retried
