"""The typed forms of the API at run time (issue 24, item 7): ``Send.to``,
``end(writes)``, ``goto(..., writes=...)``, ``Workflow(input=...)``, and a
reducer typo inside ``Annotated``. What the type checkers see is pinned in
tests/typechecks."""

from __future__ import annotations

from typing import Annotated, NotRequired, TypedDict

import pytest

from agentlog.errors import ConfigError, InvalidRouteError, WorkflowDefinitionError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunStatus
from agentlog.projector import append
from agentlog.runtime import Next, Runtime, Send, StepContext, Workflow, end, goto
from tests.support.runtime import config, event_log, run_to_rest

__all__ = ["event_log"]


class Fanout(TypedDict):
    topic: str
    notes: Annotated[list[str], append]
    summary: str


class FanoutWrites(TypedDict, total=False):
    notes: list[str]
    summary: str


class ToolCall(TypedDict):
    call: str


class Start(TypedDict):
    topic: str
    notes: NotRequired[list[str]]


async def test_typed_sends_and_writes_run(event_log: EventLog) -> None:
    wf = Workflow("typed", state=Fanout, input=Start)

    @wf.step
    async def plan(ctx: StepContext[Fanout]) -> Next[FanoutWrites]:
        calls = [ToolCall(call=f"{ctx.state['topic']}-{n}") for n in range(3)]
        return goto(*(Send.to(tool, c) for c in calls), writes=FanoutWrites(notes=["plan"]))

    @wf.step(then="wrap")
    async def tool(ctx: StepContext[Fanout, ToolCall]) -> FanoutWrites:
        return {"notes": [ctx.input["call"]]}

    @wf.step
    async def wrap(ctx: StepContext[Fanout]) -> Next[FanoutWrites]:
        return end({"summary": ",".join(ctx.state["notes"])})

    async with Runtime(event_log, workflows=[wf], config=config()) as rt:
        with pytest.raises(ConfigError, match=r"missing \['topic'\]"):
            await rt.start(wf, run_id="bad", input={"notes": []})  # type: ignore[misc]
        await rt.start(wf, run_id="t", input=Start(topic="x"), durability="sync")
        state = await run_to_rest(rt, "t")
    assert state.status == RunStatus.COMPLETED
    assert sorted(state.values["notes"]) == ["plan", "x-0", "x-1", "x-2"]
    assert state.values["summary"].count("x-") == 3
    graph = wf.mermaid()  # Send.to names its step for the graph: that one edge only
    assert "plan -.-> tool" in graph and "plan -.-> wrap" not in graph
    assert await event_log.find_run("bad") is None  # refused before anything was recorded


def test_end_and_goto_take_a_mapping_and_refuse_anything_else() -> None:
    assert end({"a": 1}).writes == {"a": 1}
    assert goto("next", writes={"a": 1}, b=2) == Next({"a": 1, "b": 2}, ("next",))
    assert end(a=1) == Next({"a": 1}, ())
    with pytest.raises(InvalidRouteError, match="mapping"):
        end(["a"])  # type: ignore[call-overload]
    with pytest.raises(InvalidRouteError, match="mapping"):
        goto("next", writes=3)  # type: ignore[arg-type]
    with pytest.raises(InvalidRouteError, match="TypedDict"):
        Send.to("tool", [1])  # type: ignore[arg-type]


def test_an_input_type_must_be_a_typeddict_of_state_keys() -> None:
    class Stray(TypedDict):
        topik: str

    with pytest.raises(WorkflowDefinitionError, match=r"input keys \['topik'\]"):
        Workflow("stray", state=Fanout, input=Stray)
    with pytest.raises(WorkflowDefinitionError, match="must be a TypedDict"):
        Workflow("plain", state=Fanout, input=dict)


def test_a_reducer_typo_inside_annotated_fails_at_definition_naming_it() -> None:
    class Typo(TypedDict):
        notes: Annotated[list[str], "apend"]

    with pytest.raises(WorkflowDefinitionError, match="'notes': unknown reducer 'apend'"):
        Workflow("typo", state=Typo)
