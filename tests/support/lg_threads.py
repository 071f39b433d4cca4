"""A small LangGraph graph on AgentlogSaver, for the archive and CLI tests of threads."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from agentlog.langgraph import AgentlogSaver


class _State(TypedDict):
    notes: Annotated[list[str], operator.add]


def approval_graph(saver: AgentlogSaver) -> Any:
    """``plan`` then ``approve``, which parks on an interrupt until answered."""

    def plan(state: _State) -> dict[str, list[str]]:
        return {"notes": ["planned"]}

    def approve(state: _State) -> dict[str, list[str]]:
        return {"notes": [f"approved:{interrupt('ok?')}"]}

    builder = StateGraph(_State)
    builder.add_node("plan", plan)
    builder.add_node("approve", approve)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "approve")
    builder.add_edge("approve", END)
    return builder.compile(checkpointer=saver)


def run_thread(db: Path, thread: str, *, answer: bool) -> list[str]:
    """Run the graph on ``thread`` in ``db`` (answering its interrupt if ``answer``);
    return the thread's checkpoint ids, newest first."""
    config: Any = {"configurable": {"thread_id": thread}}
    with AgentlogSaver.from_url(f"sqlite:///{db}") as saver:
        graph = approval_graph(saver)
        graph.invoke({"notes": []}, config)
        if answer:
            graph.invoke(Command(resume="yes"), config)
        return [t.config["configurable"]["checkpoint_id"] for t in saver.list(config)]
