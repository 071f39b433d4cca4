"""The live state is the replayed state, over generated workflows (Hypothesis).

For each generated workflow (a chain of steps, some fanning out to parallel
branches, each calling a task and writing values through replace, append and
merge reducers) the final state the runtime hands back equals ``fold`` of its
events and ``load_state`` from the log, compared with types: a tuple that
stayed a tuple live, or a datetime that kept its zone, would differ from what
a replay reads back.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog.eventlog.memory import MemoryEventLog
from agentlog.projector import fold, load_state
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end, goto

_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.text(max_size=12),
    st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
    ).map(lambda d: d.astimezone(timezone(timedelta(hours=2)))),  # not UTC: replays as UTC
)
values = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),  # replays as a list
        st.dictionaries(st.text(max_size=5), inner, max_size=3),
    ),
    max_leaves=8,
)
step_plans = st.lists(
    st.fixed_dictionaries(
        {
            "fan_out": st.booleans(),
            "result": values,
            "append": values,
            "merge": st.dictionaries(st.text(max_size=4), values, max_size=2),
        }
    ),
    min_size=1,
    max_size=4,
)


def typed(value: Any) -> Any:
    """``value`` with every container's and datetime's type spelled out."""
    if isinstance(value, dict):
        return ("dict", sorted((str(k), typed(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (type(value).__name__, [typed(v) for v in value])
    if isinstance(value, datetime):
        return ("datetime", value.isoformat())
    return (type(value).__name__, value)


def build(plans: list[dict[str, Any]]) -> Workflow:
    wf = Workflow("generated", state={"a": "replace", "b": "append", "c": "merge"})

    def make(i: int, plan: dict[str, Any]) -> None:
        last = i == len(plans) - 1
        nxt = f"s{i + 1}"

        async def step(ctx: StepContext) -> Any:
            result = await ctx.task(f"t{i}", lambda: plan["result"])
            writes = {"a": result, "b": [plan["append"]], "c": plan["merge"]}
            if last:
                return end(**writes)
            if plan["fan_out"]:
                return goto(nxt, f"side{i}", **writes)
            return goto(nxt, **writes)

        async def side(ctx: StepContext) -> Any:
            hit = await ctx.task("side", lambda: (i, plan["append"]))
            return {"b": [hit]}

        wf.step(name=f"s{i}")(step)
        wf.step(name=f"side{i}")(side)

    for i, plan in enumerate(plans):
        make(i, plan)
    return wf


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans=step_plans, durability=st.sampled_from(["sync", "async", "exit"]))
def test_live_final_state_equals_fold_and_load_state(
    plans: list[dict[str, Any]], durability: str
) -> None:
    async def scenario() -> None:
        log = MemoryEventLog()
        wf = build(plans)
        config = RuntimeConfig(owner="prop", durability=durability)  # type: ignore[arg-type]
        async with Runtime(log, workflows=[wf], config=config) as rt:
            await rt.start(wf, run_id="g")
            live = await rt.wait("g", timeout=30)
        folded = fold([e async for e in log.read("g")])
        loaded = await load_state(log, "g")
        assert live.status == "completed"
        assert typed(live.to_dict()) == typed(folded.to_dict()) == typed(loaded.to_dict())

    asyncio.run(scenario())
