"""Runs a worker passes over must not hide the runs behind them.

A worker asks the log for the oldest runs that need a driver, a bounded
number at a time, and passes over those it cannot take: runs of a workflow
it does not know (they wait for a worker that does) and runs of a workflow
at its concurrency limit. When more such runs wait than one pass reads, the
runs it could drive, further back, must still be reached within a few passes;
otherwise a backlog of one workflow starves every other one on that worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentlog.runtime import Runtime, RuntimeConfig, StepContext, WorkerConfig, Workflow, end

pytestmark = pytest.mark.fleet

#: More runs wait than one pass reads with the worker settings below.
BACKLOG = 60
#: A few passes, not one per waiting run.
PASSES = 6


def one_step(name: str, gate: asyncio.Event | None = None) -> Workflow:
    wf = Workflow(name, state={"done": "replace"})

    @wf.step
    async def only(ctx: StepContext) -> Any:
        if gate is not None:
            await gate.wait()  # stays in flight: its workflow is at its limit
        return end(done=True)

    return wf


@pytest.fixture
async def url(tmp_path: Path) -> AsyncIterator[str]:
    yield f"sqlite:///{tmp_path / 'skips.db'}"


async def _reaches(worker_rt: Runtime, run_id: str) -> int | None:
    """The pass (1-based) in which the worker took ``run_id``, within PASSES."""
    for attempt in range(1, PASSES + 1):
        if run_id in await worker_rt.worker.run_once():
            return attempt
    return None


async def _submit_backlog(url: str, backlog: Workflow, known: Workflow) -> None:
    config = RuntimeConfig(owner="client", execute=False, worker=False)
    async with await Runtime.open(url, workflows=[backlog, known], config=config) as client:
        for i in range(BACKLOG):  # the oldest runs
            await client.submit(backlog, run_id=f"backlog-{i:03d}")
        await client.submit(known, run_id="behind")  # the newest run


async def test_runs_of_an_unknown_workflow_do_not_starve_the_runs_behind_them(url: str) -> None:
    known = one_step("known")
    await _submit_backlog(url, one_step("unknown"), known)
    config = RuntimeConfig(owner="worker", worker=False, worker_config=WorkerConfig(concurrency=2))
    async with await Runtime.open(url, workflows=[known], config=config) as rt:
        took_in = await _reaches(rt, "behind")
    assert took_in is not None, (
        f"{BACKLOG} runs of an unknown workflow hid a run the worker knows for {PASSES} passes"
    )


async def test_runs_over_a_workflow_limit_do_not_starve_other_workflows(url: str) -> None:
    gate = asyncio.Event()
    limited, known = one_step("limited", gate), one_step("known")
    await _submit_backlog(url, limited, known)
    settings = WorkerConfig(concurrency=4, workflow_concurrency={"limited": 1})
    config = RuntimeConfig(owner="worker", worker=False, worker_config=settings)
    async with await Runtime.open(url, workflows=[limited, known], config=config) as rt:
        try:
            took_in = await _reaches(rt, "behind")
            assert rt.active_count("limited") == 1
        finally:
            gate.set()
    assert took_in is not None, (
        f"{BACKLOG} runs of a workflow at its limit hid another workflow's run for {PASSES} passes"
    )
