"""Two parallel branches that both ask a human: one open interrupt at a time."""

from __future__ import annotations

import asyncio

from agentlog.eventlog.memory import MemoryEventLog
from agentlog.projector import load_state
from agentlog.runtime import Runtime, StepContext, Workflow, end, goto
from agentlog.runtime.workflow import Next


def _workflow(calls: list[str]) -> Workflow:
    wf = Workflow("two-asks", state={"answers": "append"})

    @wf.step
    async def fan(ctx: StepContext) -> Next:
        return goto("ask_a", "ask_b")

    def asker(name: str) -> None:
        async def step(ctx: StepContext) -> Next:
            calls.append(name)
            answer = ctx.interrupt({"who": name})
            return end(answers=[f"{name}={answer}"])

        step.__name__ = name
        wf.step(step)

    asker("ask_a")
    asker("ask_b")
    return wf


async def test_second_interrupt_is_asked_after_the_first_is_answered() -> None:
    calls: list[str] = []
    log = MemoryEventLog()
    async with asyncio.timeout(10), Runtime(log, workflows=[_workflow(calls)]) as rt:
        await rt.start("two-asks", run_id="r", durability="sync")
        first = await rt.wait("r")
        assert first.status == "waiting"
        assert [i["payload"]["who"] for i in first.interrupts] == ["ask_a"]

        await rt.resume("r", "yes")
        second = await rt.wait("r")
        assert second.status == "waiting"  # the other branch asks now
        assert [i["payload"]["who"] for i in second.interrupts] == ["ask_b"]
        assert (await log.get_run("r")).status == "waiting"  # the index agrees

        await rt.resume("r", "no")
        final = await rt.wait("r")
    assert final.status == "completed"
    assert sorted(final.values["answers"]) == ["ask_a=yes", "ask_b=no"]
    replay = await load_state(log, "r", use_snapshots=False)
    assert replay.to_dict() == final.to_dict()
    types = [e.type async for e in log.read("r")]
    assert types.count("InterruptRaised") == 2 and types.count("ResumeReceived") == 2
