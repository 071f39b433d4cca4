"""The timeline and ``agentlog show`` rows of a run with messages: a recv's
park is a mark that the message which woke it answers."""

from __future__ import annotations

from typing import Any

from agentlog.eventlog.memory import MemoryEventLog
from agentlog.replay import build_timeline, event_row
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end


async def test_a_message_answers_the_recv_mark_it_woke() -> None:
    wf = Workflow("inbox", state={"got": "replace"})

    @wf.step
    async def take(ctx: StepContext) -> Any:
        return end(got=await ctx.recv("orders"))

    log = MemoryEventLog()
    async with Runtime(log, workflows=[wf], config=RuntimeConfig(worker=False)) as rt:
        await rt.start(wf, run_id="m")
        await rt.wait("m")
        await rt.send("m", "orders", {"id": 7})
        await rt.wait("m")
    events = [e async for e in log.read("m")]
    marks = build_timeline(events).marks
    interrupts = [m for m in marks if m.kind == "interrupt"]
    assert len(interrupts) == 1
    sent = next(e for e in events if e.type == "MessageSent")
    assert (interrupts[0].answered_by, interrupts[0].answered_seq) == ("message", sent.seq)
    row = event_row(sent)
    assert row["type"] == "MessageSent"
    assert row["payload"]["topic"] == "orders" and row["payload"]["value"] == {"id": 7}
