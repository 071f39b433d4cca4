"""Workflows that exercise every part of the timeline, for the replay tests.

``debug_workflow``: ``fan`` fans out to two branches; ``fetch`` runs two
tasks at the same time, one of which fails once and then succeeds (a retry);
``ask`` waits for a human; ``finish`` ends the run once the answer arrives.
``rounds_workflow`` repeats such rounds (with step retries and a run failure
and retry too), for the timeline's windows; :func:`restricted` is what a
window must equal.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentlog.eventlog import Event, EventLog
from agentlog.replay import Timeline
from agentlog.replay._timeline_window import window_counts
from agentlog.runtime import (
    RetryPolicy,
    Runtime,
    RuntimeConfig,
    StepContext,
    Workflow,
    end,
    goto,
    task,
)
from agentlog.runtime._workflow import Next

#: How many times ``flaky`` was called in this process (it fails the first time).
CALLS = {"flaky": 0}


@task
async def slow(name: str) -> str:
    await asyncio.sleep(0.01)
    return f"slow {name}"


@task(retry=RetryPolicy(max_attempts=3, initial_interval=0.001))
async def flaky(name: str) -> str:
    CALLS["flaky"] += 1
    await asyncio.sleep(0.005)
    if CALLS["flaky"] == 1:
        raise RuntimeError("flaky service: try again")
    return f"flaky {name}"


def debug_workflow() -> Workflow:
    """fan -> (fetch | ask) -> finish."""
    wf = Workflow("debug", state={"log": "append"})

    @wf.step
    async def fan(ctx: StepContext) -> Next:
        return goto("fetch", "ask", log=["fan"])

    @wf.step
    async def fetch(ctx: StepContext) -> Next:
        both = await asyncio.gather(slow("a"), flaky("b"))
        return goto("finish", log=list(both))

    @wf.step
    async def ask(ctx: StepContext) -> Next:
        answer = ctx.interrupt({"question": "ship it?"})
        return goto("finish", log=[f"answer={answer}"])

    @wf.step
    async def finish(ctx: StepContext) -> Next:
        return end(log=["done"])

    return wf


#: Rounds of ``rounds_workflow`` whose ``flaky_round`` task, ``plan`` step and
#: ``check`` step (failing the run) have failed once already.
FAILED: dict[str, set[int]] = {"task": set(), "step": set(), "run": set()}


@task(retry=RetryPolicy(max_attempts=3, initial_interval=0.001))
async def flaky_round(n: int) -> int:
    if n % 2 == 0 and n not in FAILED["task"]:
        FAILED["task"].add(n)
        raise RuntimeError(f"round {n}: try again")
    return n


def rounds_workflow(rounds: int) -> Workflow:
    """``rounds`` rounds of plan -> (work | check): ``work`` runs two tasks at
    once, one of which fails once every other round (a retry); ``plan``
    fails once in round 2 (a step retry); ``check`` waits for a human every
    third round and fails the run once in round 4 (``Runtime.retry`` goes on);
    the run ends after the last round."""
    wf = Workflow("rounds", state={"log": "append", "round": "replace"})

    @wf.step(retry=RetryPolicy(max_attempts=2, initial_interval=0.001))
    async def plan(ctx: StepContext) -> Next:
        n = ctx.state.get("round", 0) + 1
        if n == 2 and n not in FAILED["step"]:
            FAILED["step"].add(n)
            raise RuntimeError("round 2: plan again")
        return goto("work", "check", round=n)

    @wf.step
    async def work(ctx: StepContext) -> Next:
        n = ctx.state["round"]
        both = await asyncio.gather(slow(f"r{n}"), flaky_round(n))
        return end(log=[str(both)]) if n >= rounds else goto("plan", log=[str(both)])

    @wf.step(retry=RetryPolicy(max_attempts=1))
    async def check(ctx: StepContext) -> Next:
        n = ctx.state["round"]
        if n == 4 and n not in FAILED["run"]:
            FAILED["run"].add(n)
            raise ValueError("round 4: the checker is down")
        answer = ctx.interrupt({"round": n}) if n % 3 == 0 else "auto"
        return end(log=[f"check {n}: {answer}"]) if n >= rounds else goto("plan")

    return wf


async def recorded_rounds(
    log: EventLog, rounds: int, run_id: str = "rounds", config: RuntimeConfig | None = None
) -> list[Event]:
    """``rounds_workflow`` on ``log``: answered at each interrupt, retried after its failure."""
    for failed in FAILED.values():
        failed.clear()
    workflows = [rounds_workflow(rounds)]
    async with asyncio.timeout(60), Runtime(log, workflows=workflows, config=config) as rt:
        await rt.start("rounds", run_id=run_id, durability="sync")
        while (status := (await rt.wait(run_id)).status) != "completed":
            if status == "waiting":
                await rt.resume(run_id, "yes")
            else:
                assert status == "failed"
                await rt.retry(run_id)
    return [e async for e in log.read(run_id)]


def restricted(full: Timeline, first: int, steps: int, answer: dict[str, Any]) -> dict[str, Any]:
    """The whole run's model cut to the window ``answer`` claims to be, with the
    counts that window ships (the run's if it holds the run, else its own)."""
    expected = full.to_json(first_step=first, max_steps=steps)
    if answer["counts_scope"] == "window":
        expected["counts"] = window_counts(expected, len(full.steps), full.steps_done)
    return {**expected, "counts_scope": answer["counts_scope"]}
