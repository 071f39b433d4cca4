"""The workflows that the worker benchmarks' ``agentlog worker`` processes run.

``agentlog worker --app benchmarks.fleet_app:workflows`` imports this module
(run from the repo root); ``benchmarks/bench_workers.py`` submits runs of
these workflows by name from another process.

* ``bench-timer``: one step that sleeps durably until
  ``AGENTLOG_BENCH_TIMER_EPOCH + offset`` (UNIX seconds; the epoch is in the
  worker's environment, the offset in the run's input), then ends. The epoch
  comes from the environment, not the input, so that the benchmark can fix
  it after every run is submitted (see ``bench_workers.timer_lateness``).
* ``bench-io``: an I/O-bound agent: every step is one task that awaits
  100 ms, like a model call, and the run loops for ``steps`` steps.
* ``bench-park``: one step that parks on a human's approval, then ends with
  the answer: a run that waits for days costs its worker nothing but memory.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime

from agentlog.runtime import StepContext, Workflow, end, goto
from agentlog.runtime._workflow import Next

__all__ = ["EPOCH_ENV", "IO", "MODEL_CALL_S", "PARK", "TIMER", "workflows"]

#: The environment variable that holds the timer workflow's epoch (UNIX seconds).
EPOCH_ENV = "AGENTLOG_BENCH_TIMER_EPOCH"
#: How long one "model call" of the I/O-bound agent takes.
MODEL_CALL_S = 0.1
TIMER = "bench-timer"
IO = "bench-io"
PARK = "bench-park"


def _timer_workflow() -> Workflow:
    wf = Workflow(TIMER, state={"offset": "replace", "fired": "replace"})

    @wf.step
    async def nap(ctx: StepContext) -> Next:
        epoch = os.environ.get(EPOCH_ENV)
        if epoch is None:
            raise RuntimeError(f"{TIMER} needs {EPOCH_ENV} (UNIX seconds) in the environment")
        due = datetime.fromtimestamp(float(epoch) + float(ctx.state["offset"]), UTC)
        await ctx.sleep_until(due)
        return end(fired=True)

    return wf


async def _model_call() -> str:
    await asyncio.sleep(MODEL_CALL_S)
    return "ok"


def _io_workflow() -> Workflow:
    wf = Workflow(IO, state={"steps": "replace", "n": "replace"}, max_steps=10_000_000)

    @wf.step
    async def think(ctx: StepContext) -> Next:
        await ctx.task("model", _model_call)
        n = ctx.state.get("n", 0) + 1
        if n >= ctx.state.get("steps", 5):
            return end(n=n)
        return goto("think", n=n)

    return wf


def _park_workflow() -> Workflow:
    wf = Workflow(PARK, state={"answer": "replace"})

    @wf.step
    async def approve(ctx: StepContext) -> Next:
        return end(answer=ctx.interrupt({"approve": ctx.run_id}))

    return wf


workflows = [_timer_workflow(), _io_workflow(), _park_workflow()]
