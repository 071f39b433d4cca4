"""What a reader gets is its own: editing it in place changes nothing stored.

LangGraph documents "edit the tool call, then ``update_state``": read the
state, change the last AIMessage's tool call in place, and write that
message back. The saver keeps the newest value of a message list cached as
the base of the next delta; if a reader's list shared its items with that
cache, the edit would reach the cache, the next checkpoint would look like
it appended nothing, and the edit would never be stored.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from agentlog.langgraph import AgentlogSaver, _convert

CONFIG: Any = {"configurable": {"thread_id": "t1"}}


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def agent(state: State) -> dict[str, Any]:
    call = {"name": "search", "args": {"query": "kafka"}, "id": "call-1"}
    return {"messages": [AIMessage("", id="ai-1", tool_calls=[call])]}


def tools(state: State) -> dict[str, Any]:
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    args = last.tool_calls[0]["args"]
    return {"messages": [ToolMessage(f"searched {args}", tool_call_id="call-1", id="tool-1")]}


def build(saver: BaseCheckpointSaver[Any]) -> Any:
    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "tools")
    builder.add_edge("tools", END)
    return builder.compile(checkpointer=saver, interrupt_before=["tools"])


def edit_the_tool_call_then_resume(graph: Any) -> None:
    """LangGraph's documented pattern, editing the returned message in place."""
    graph.invoke({"messages": [HumanMessage("search for me", id="human-1")]}, CONFIG)
    message = graph.get_state(CONFIG).values["messages"][-1]
    message.tool_calls[0]["args"] = {"query": "sqlite"}
    graph.update_state(CONFIG, {"messages": [message]})
    graph.invoke(None, CONFIG)


def dumped(messages: list[AnyMessage]) -> list[dict[str, Any]]:
    return [m.model_dump() for m in messages]


def test_an_in_place_edit_then_update_state_is_stored(log_url: str) -> None:
    reference = build(InMemorySaver())
    edit_the_tool_call_then_resume(reference)
    expected = dumped(reference.get_state(CONFIG).values["messages"])
    assert "sqlite" in expected[-1]["content"]  # the tool ran with the edited call

    with AgentlogSaver.from_url(log_url) as saver:
        graph = build(saver)
        edit_the_tool_call_then_resume(graph)
        assert dumped(graph.get_state(CONFIG).values["messages"]) == expected
    with AgentlogSaver.from_url(log_url) as reopened:  # only what the log holds
        stored = dumped(build(reopened).get_state(CONFIG).values["messages"])
    assert stored == expected, "the edited tool call was not stored"


def test_editing_what_get_tuple_returned_changes_no_later_read(log_url: str) -> None:
    with AgentlogSaver.from_url(log_url) as saver:
        graph = build(saver)
        graph.invoke({"messages": [HumanMessage("search for me", id="human-1")]}, CONFIG)
        before = saver.get_tuple(CONFIG)
        assert before is not None
        read = before.checkpoint["channel_values"]["messages"]
        read[-1].tool_calls[0]["args"]["query"] = "edited by a reader"
        read.append(HumanMessage("appended by a reader", id="human-2"))
        after = saver.get_tuple(CONFIG)
        assert after is not None
        again = after.checkpoint["channel_values"]["messages"]
        assert [m.id for m in again] == ["human-1", "ai-1"]
        assert again[-1].tool_calls[0]["args"] == {"query": "kafka"}


def test_a_warm_read_copies_builtin_data_without_deepcopy(monkeypatch: Any) -> None:
    """Issue 23 item 8: a reader's copy of the checkpoint's skeleton and
    metadata (builtin data read back from msgpack: no cycles, nothing shared)
    is made by a plain walk, not ``copy.deepcopy`` and its memo, which was most
    of a warm ``get_tuple``. The copy is still the reader's own."""
    with AgentlogSaver.from_url("memory://") as saver:
        saver.put(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
            {
                "v": 4,
                "id": "1",
                "ts": "2026-12-03T00:00:00+00:00",
                "channel_values": {"n": 1},
                "channel_versions": {"n": "1"},
                "versions_seen": {"node": {"n": "1"}},
                "updated_channels": ["n"],
            },
            {"source": "loop", "step": 1, "parents": {}},
            {"n": "1"},
        )
        calls = 0
        real = copy.deepcopy

        def counting(value: Any, memo: Any = None) -> Any:
            nonlocal calls
            calls += 1
            return real(value, memo)

        monkeypatch.setattr(_convert.copy, "deepcopy", counting)
        read = saver.get_tuple({"configurable": {"thread_id": "t"}})
        assert read is not None and read.checkpoint["channel_values"] == {"n": 1}
        assert calls == 0, f"{calls} deepcopy calls for one warm read of builtin data"
        read.checkpoint["versions_seen"]["node"]["n"] = "edited"
        read.metadata["step"] = 99
        again = saver.get_tuple({"configurable": {"thread_id": "t"}})
        assert again is not None
        assert again.checkpoint["versions_seen"] == {"node": {"n": "1"}}
        assert again.metadata["step"] == 1
