"""A subgraph task whose writes were saved does not run again on resume.

A subgraph runs two nodes in one step; ``b`` fails on the first call, after
``a`` finished, so the subgraph's checkpoint keeps ``a``'s writes as pending
writes. The second call (``invoke(None)``) resumes the thread: LangGraph must
hand ``a``'s saved writes back to it and run only ``b``.

LangGraph before 1.2.16 runs ``a`` again. Its loop took a subgraph for a
replay of an addressed checkpoint (``is_replaying = "checkpoint_id" in
config["configurable"]``, and every task config carries ``checkpoint_id:
None``), and a replay does not reapply pending writes. 1.2.16 decides from
the value instead (``PregelLoop._addressed``). It does so on LangGraph's own
InMemorySaver just as on agentlog's saver; what the saver owes, that the
subgraph's pending writes come back from the log, holds on every version.
This is what made ``test_crash.py`` fail on 1.2.11.
"""

from __future__ import annotations

import importlib.metadata
import operator
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from tests.langgraph.graphs.checks import by_namespace, ns_label
from tests.langgraph.graphs.graphs import Graph, SaverKind, config_for, open_saver

THREAD = "subgraph-resume"
#: The first langgraph whose subgraphs reapply their saved pending writes on resume.
FIXED_IN = (1, 2, 16)


def _langgraph_version() -> tuple[int, ...]:
    return tuple(int(part) for part in importlib.metadata.version("langgraph").split(".")[:3])


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


class Runs:
    """Which nodes ran, and whether ``b`` still fails."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.b_fails = True


def build(saver: BaseCheckpointSaver[Any], runs: Runs) -> Graph:
    def a(state: State) -> dict[str, Any]:
        runs.ran.append("a")
        return {"log": ["a"]}

    def b(state: State) -> dict[str, Any]:
        runs.ran.append("b")
        if runs.b_fails:
            raise RuntimeError("b fails on the first call")
        return {"log": ["b"]}

    inner = StateGraph(State)
    inner.add_node("a", a)
    inner.add_node("b", b)
    inner.add_edge(START, "a")
    inner.add_edge(START, "b")
    inner.add_edge("a", END)
    inner.add_edge("b", END)
    outer = StateGraph(State)
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "sub")
    outer.add_edge("sub", END)
    return outer.compile(checkpointer=saver)


@pytest.fixture(params=["agentlog", "memory"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    kind: SaverKind = request.param
    with open_saver(kind, f"sqlite:///{tmp_path / 'agentlog.db'}") as opened:
        yield opened


def fail_once(saver: BaseCheckpointSaver[Any], runs: Runs) -> Graph:
    """The first call: ``a`` finishes, ``b`` fails."""
    graph = build(saver, runs)
    with pytest.raises(RuntimeError, match="b fails"):
        graph.invoke({"log": []}, config_for(THREAD), durability="sync")
    assert sorted(runs.ran) == ["a", "b"]
    return graph


def test_saver_returns_the_subgraph_pending_writes(saver: BaseCheckpointSaver[Any]) -> None:
    fail_once(saver, Runs())
    (sub_ns,) = [ns for ns in by_namespace(saver, THREAD) if ns_label(ns) == "sub"]
    latest = saver.get_tuple({"configurable": {"thread_id": THREAD, "checkpoint_ns": sub_ns}})
    assert latest is not None
    writes = [(channel, value) for _, channel, value in latest.pending_writes or []]
    assert ("log", ["a"]) in writes, writes


def test_resume_reruns_a_finished_subgraph_task_only_before_langgraph_1_2_16(
    saver: BaseCheckpointSaver[Any],
) -> None:
    """From 1.2.16 only the failed task runs again. Before it, LangGraph takes
    every subgraph for a replay and runs ``a`` again too, on its own
    InMemorySaver as on ours, although the saver returned a's writes."""
    runs = Runs()
    graph = fail_once(saver, runs)
    runs.ran.clear()
    runs.b_fails = False
    assert graph.invoke(None, config_for(THREAD), durability="sync") == {"log": ["a", "b"]}
    expected = ["b"] if _langgraph_version() >= FIXED_IN else ["a", "b"]
    assert sorted(runs.ran) == expected
