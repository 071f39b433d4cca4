"""A three-step workflow for the fork tests, counting every real execution.

``fetch -> think -> write``: each step runs one task; ``write`` uses the
``topic`` key, so an update of ``topic`` at a fork point shows in the
forked run's result. Module-level counters (``CALLS``) so that ``--app
tests.support.fork:chain`` in the CLI tests counts too; :func:`reset` them.
"""

from __future__ import annotations

from typing import Any

from agentlog.eventlog._base import EventReader
from agentlog.eventlog.events import Event
from agentlog.projector._state import RunState
from agentlog.runtime import StepContext, Workflow, end, goto
from agentlog.runtime._workflow import Next
from tests.support.runtime import Calls

#: Real executions of step bodies and task functions, by name.
CALLS = Calls()

STATE = {"topic": "replace", "facts": "append", "thought": "replace", "text": "replace"}


def reset() -> None:
    """Forget every counted execution."""
    CALLS.count.clear()
    CALLS.keys.clear()


def chain_workflow(name: str = "fork-chain", version: str = "1") -> Workflow:
    """fetch -> think -> write, one task each, every execution counted in CALLS."""
    wf = Workflow(name, version=version, state=dict(STATE))

    def effect(what: str, idempotency_key: str) -> str:
        CALLS.hit(what, idempotency_key)
        return f"{what}#{CALLS.count[what]}"

    @wf.step
    async def fetch(ctx: StepContext) -> Next:
        CALLS.hit("step.fetch")
        found = await ctx.task("fetch", effect, "task.fetch")
        return goto("think", facts=[found])

    @wf.step
    async def think(ctx: StepContext) -> Next:
        CALLS.hit("step.think")
        thought = await ctx.task("think", effect, "task.think")
        return goto("write", thought=thought)

    @wf.step
    async def write(ctx: StepContext) -> Next:
        CALLS.hit("step.write")
        text = await ctx.task("write", effect, "task.write")
        return end(text=f"{text} on {ctx.state['topic']}")

    return wf


#: For ``--app tests.support.fork:chain``.
chain = chain_workflow()


async def events_of(history: EventReader, run_id: str) -> list[Event]:
    """Every event of the run, in seq order."""
    return [event async for event in history.read(run_id)]


def seq_of(events: list[Event], event_type: str, nth: int = 1, **fields: Any) -> int:
    """The seq of the ``nth`` event of ``event_type`` whose payload has ``fields``."""
    found = [
        e.seq
        for e in events
        if e.type == event_type
        and all(e.data.to_dict().get(name) == value for name, value in fields.items())
    ]
    return found[nth - 1]


def comparable(state: RunState) -> dict[str, Any]:
    """The state without what differs between an origin and its fork by design:
    the run id, seq, writer epoch, fork marker, and the task keys (derived from
    the run id; tasks are compared in the order they were recorded)."""
    data = state.to_dict()
    for name in ("run_id", "seq", "writer_epoch", "forked_from"):
        data.pop(name)
    order = list(state.tasks)
    data["tasks"] = list(state.tasks.values())
    data["branch_tasks"] = {
        branch: [order.index(k) for k in keys] for branch, keys in state.branch_tasks.items()
    }
    return data
