"""Graphs whose state holds classes work under LangGraph's default settings.

LangGraph hands a checkpointer the classes of a graph's schema only when
LANGGRAPH_STRICT_MSGPACK is set, so without it the saver learns them from
code: LangChain's agent steps and messages are allowed by default, and
``allowed=[State]`` allows a state class and every pydantic model,
dataclass and enum its fields reach. Stored bytes never add to the list.
Each graph runs to an interrupt, is resumed by a fresh saver (only what the
log holds), and must end as it ends on LangGraph's InMemorySaver.
"""

from __future__ import annotations

import enum
import operator
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

import ormsgpack
import pytest
from langchain_core.agents import AgentAction, AgentFinish
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt
from pydantic import BaseModel

from agentlog.errors import ConfigError, ForbiddenTypeError
from agentlog.langgraph import AgentlogSaver, StrictSerializer
from agentlog.langgraph._schema import schema_classes

CONFIG: Any = {"configurable": {"thread_id": "t1"}}
HERE = __name__


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Point:
    x: int
    y: int


class Item(BaseModel):
    name: str
    at: Point | None = None


class PydanticState(BaseModel):
    topic: str
    items: Annotated[list[Item], operator.add] = []
    color: Color = Color.RED
    approved: bool = False


@dataclass
class DataclassState:
    topic: str
    points: Annotated[list[Point], operator.add] = field(default_factory=list)
    color: Color = Color.RED
    approved: bool = False


class AgentState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    steps: Annotated[list[tuple[AgentAction, str]], operator.add]
    finish: AgentFinish
    approved: bool


def work(state: Any) -> dict[str, Any]:
    """One step of each schema's graph, writing values of its classes."""
    if isinstance(state, PydanticState):
        return {"items": [Item(name=state.topic, at=Point(1, 2))], "color": Color.BLUE}
    if isinstance(state, DataclassState):
        return {"points": [Point(3, 4)], "color": Color.BLUE}
    action = AgentAction(tool="search", tool_input={"q": "kafka"}, log="searching")
    return {
        "messages": [AIMessage("searching", id="ai-1")],
        "steps": [(action, "3 results")],
        "finish": AgentFinish({"output": "done"}, log="finished"),
    }


def ask(state: Any) -> dict[str, Any]:
    return {"approved": interrupt("approve?")}


def build(schema: Any, saver: BaseCheckpointSaver[Any]) -> Any:
    builder = StateGraph(schema)
    builder.add_node("work", work)
    builder.add_node("ask", ask)
    builder.add_edge(START, "work")
    builder.add_edge("work", "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=saver)


START_INPUT: dict[Any, Any] = {
    PydanticState: PydanticState(topic="durable agents"),
    DataclassState: DataclassState(topic="durable agents"),
    AgentState: {"messages": [HumanMessage("go", id="human-1")]},
}


def final_state(schema: Any, open_saver: Any) -> Any:
    """Run to the interrupt on one saver, resume on a fresh one, read it on a third."""
    with open_saver() as saver:
        build(schema, saver).invoke(START_INPUT[schema], CONFIG)
    with open_saver() as saver:
        build(schema, saver).invoke(Command(resume=True), CONFIG)
    with open_saver() as saver:
        return build(schema, saver).get_state(CONFIG).values


def reference(schema: Any) -> Any:
    saver = InMemorySaver()
    graph = build(schema, saver)
    graph.invoke(START_INPUT[schema], CONFIG)
    graph.invoke(Command(resume=True), CONFIG)
    return graph.get_state(CONFIG).values


def test_agent_steps_and_messages_load_with_the_default_settings(log_url: str) -> None:
    got = final_state(AgentState, lambda: AgentlogSaver.from_url(log_url))
    assert got == reference(AgentState)
    assert isinstance(got["steps"][0][0], AgentAction) and got["approved"] is True


@pytest.mark.parametrize("schema", [PydanticState, DataclassState])
@pytest.mark.parametrize("how", ["allowed", "serde"])
def test_a_state_class_allows_the_classes_its_fields_reach(
    log_url: str, schema: type, how: str
) -> None:
    def open_saver() -> AgentlogSaver:
        if how == "allowed":
            return AgentlogSaver.from_url(log_url, allowed=[schema])
        return AgentlogSaver.from_url(log_url, serde=StrictSerializer(allowed=[schema]))

    got = final_state(schema, open_saver)
    assert got == reference(schema)
    assert got["color"] is Color.BLUE and got["approved"] is True


def test_the_walk_collects_exactly_the_classes_the_schema_reaches() -> None:
    assert schema_classes([PydanticState]) == {
        (HERE, "PydanticState"),
        (HERE, "Item"),
        (HERE, "Point"),
        (HERE, "Color"),
    }
    assert schema_classes([AgentState]) >= {
        ("langchain_core.agents", "AgentAction"),
        ("langchain_core.agents", "AgentFinish"),
    }


def test_allowing_a_schema_allows_nothing_it_does_not_name() -> None:
    serde = StrictSerializer(allowed=[PydanticState])
    inner = ormsgpack.packb(("tests.langgraph.sentinel_payload", "Gadget", "touch pwned"))
    with pytest.raises(ForbiddenTypeError, match=r"sentinel_payload\.Gadget"):
        serde.loads_typed(("msgpack", ormsgpack.packb([ormsgpack.Ext(5, inner)])))


def test_allowed_and_serde_together_are_refused(log_url: str) -> None:
    with pytest.raises(ConfigError, match="allowed= or serde="):
        AgentlogSaver.from_url(log_url, serde=StrictSerializer(), allowed=[PydanticState])
