"""Parallel branches that both ask a human: several open interrupts, each with an id."""

from __future__ import annotations

import asyncio

import pytest

from agentlog.errors import InvalidResumeValueError
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.projector import load_state
from agentlog.runtime import Runtime, StepContext, Workflow, end, goto
from agentlog.runtime._workflow import Next


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


async def test_both_interrupts_are_open_and_answered_by_id() -> None:
    calls: list[str] = []
    log = MemoryEventLog()
    async with asyncio.timeout(10), Runtime(log, workflows=[_workflow(calls)]) as rt:
        await rt.start("two-asks", run_id="r", durability="sync")
        first = await rt.wait("r")
        assert first.status == "waiting"
        pending = await rt.pending("r")
        assert [p.payload["who"] for p in pending] == ["ask_a", "ask_b"]
        ids = {p.payload["who"]: p.id for p in pending}
        with pytest.raises(InvalidResumeValueError, match="2 open interrupts"):
            await rt.resume("r", "yes")  # which one? nothing is recorded
        with pytest.raises(InvalidResumeValueError, match="no open interrupt"):
            await rt.resume("r", answers={"9:9:9": "yes"})

        await rt.resume("r", {ids["ask_b"]: "no"})  # one of them
        second = await rt.wait("r")
        assert second.status == "waiting"  # ask_a still waits
        assert [p.id for p in await rt.pending("r")] == [ids["ask_a"]]
        assert (await log.get_run("r")).status == "waiting"  # the index agrees

        await rt.resume("r", "yes")  # one open: a plain value answers it
        final = await rt.wait("r")
    assert final.status == "completed"
    assert sorted(final.values["answers"]) == ["ask_a=yes", "ask_b=no"]
    replay = await load_state(log, "r", use_snapshots=False)
    assert replay.to_dict() == final.to_dict()
    types = [e.type async for e in log.read("r")]
    assert types.count("ResumeReceived") == 2
    assert calls.count("ask_b") == 2  # asked, then answered; never a third time


async def test_several_answers_at_once() -> None:
    log = MemoryEventLog()
    async with asyncio.timeout(10), Runtime(log, workflows=[_workflow([])]) as rt:
        await rt.start("two-asks", run_id="r", durability="sync")
        await rt.wait("r")
        ids = [p.id for p in await rt.pending("r")]
        await rt.resume("r", answers=dict(zip(ids, ["a", "b"], strict=True)))
        final = await rt.wait("r")
    assert sorted(final.values["answers"]) == ["ask_a=a", "ask_b=b"]
