"""The real LangGraph graph these tests run, its driver, and the savers it runs on.

One graph has every feature the issue names::

    START -> plan --(conditional edge, one Send per topic)--> search x3 (parallel)
          -> summarize (a subgraph: draft -> polish) -> review (interrupt())
          -> review's conditional edge: revise -> review again, or publish -> END

``review`` asks for approval with ``interrupt()``; the driver answers with
``Command(resume=...)``, rejecting the first draft and approving the second, so a
thread parks twice. Messages carry fixed ids, so two runs of the graph end in
equal states whatever saver or process ran them.

Each node can record its execution in a counting store (:class:`Executions`),
a SQLite file of its own, committed before the node returns, so what ran
survives a SIGKILL of the process that ran it.

This module is imported by the test processes and by their child processes
(``python -m tests.langgraph.graphs.crash_child`` and ``race_child``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import operator
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Interrupt, Send, StateSnapshot, interrupt

TOPICS = ("kafka", "sqlite", "parquet")
DURABILITIES = ("exit", "async", "sync")
INPUT = {"messages": [HumanMessage("write a note on durable agents", id="m-input")]}

Graph = CompiledStateGraph[Any, Any, Any, Any]

#: Savers a thread can run on: agentlog's, and LangGraph's own as references.
SaverKind = Literal["agentlog", "langgraph-sqlite", "memory"]


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    topics: list[str]
    findings: Annotated[list[str], operator.add]
    draft: str
    rounds: int
    approved: bool


class SummaryState(TypedDict, total=False):
    """The subgraph's own state: it reads the findings, and hands back only its output."""

    messages: Annotated[list[AnyMessage], add_messages]
    findings: list[str]
    rounds: int
    draft: str


class SummaryOutput(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    draft: str


class SearchInput(TypedDict):
    topic: str


class Executions:
    """The counting store: one row per node execution, in a SQLite file of its own.

    Args:
        path: The file; created on first use.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        with contextlib.closing(self._connect()) as db, db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS executions (n INTEGER PRIMARY KEY AUTOINCREMENT, "
                "gen INTEGER, node TEXT, ns TEXT, step INTEGER, input TEXT)"
            )

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        return db

    def record(self, gen: int, node: str, config: RunnableConfig, node_input: Any) -> None:
        """Record one execution; committed (and synced) before this returns."""
        meta = config.get("metadata", {})
        ns = str(config.get("configurable", {}).get("checkpoint_ns", ""))
        with contextlib.closing(self._connect()) as db, db:
            db.execute(
                "INSERT INTO executions (gen, node, ns, step, input) VALUES (?,?,?,?,?)",
                (gen, node, ns, int(meta.get("langgraph_step", -1)), digest(node_input)),
            )

    def rows(self) -> list[tuple[int, str, str, int, str]]:
        """Every execution so far, in order: (gen, node, ns, step, input digest)."""
        with contextlib.closing(self._connect()) as db:
            return db.execute(
                "SELECT gen, node, ns, step, input FROM executions ORDER BY n"
            ).fetchall()

    def count(self) -> int:
        with contextlib.closing(self._connect()) as db:
            return int(db.execute("SELECT count(*) FROM executions").fetchone()[0])


def plain(value: Any) -> Any:
    """A saver-independent form of a value: messages by type, id and text; interrupts by value."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, AIMessage | HumanMessage):
        return {"type": value.type, "id": value.id, "content": value.content}
    if isinstance(value, Interrupt):  # its id derives from a task id: random per run
        return {"interrupt": plain(value.value)}
    return value


def digest(node_input: Any) -> str:
    """A stable hash of what a node was given."""
    raw = json.dumps(plain(node_input), sort_keys=True, default=repr)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def build_graph(
    checkpointer: BaseCheckpointSaver[Any] | None,
    executions: Executions | None = None,
    gen: int = 0,
    on_review: Callable[[Any], None] | None = None,
    pause: float = 0.0,
) -> Graph:
    """Compile the graph on ``checkpointer``.

    Args:
        checkpointer: The saver.
        executions: Where each node records its execution, if anywhere.
        gen: The process generation recorded with each execution.
        on_review: Called with the resume value in ``review`` once the
            interrupt has an answer, before the node returns (the race test's
            barrier).
        pause: Seconds each node takes after recording itself (the crash test
            stretches the graph so that its kills land mid-node as often as
            between nodes).
    """

    def seen(node: str, config: RunnableConfig, node_input: Any) -> None:
        if executions is not None:
            executions.record(gen, node, config, node_input)
        time.sleep(pause)

    def plan(state: State, config: RunnableConfig) -> dict[str, Any]:
        seen("plan", config, state)
        return {
            "messages": [AIMessage(f"plan: {', '.join(TOPICS)}", id="m-plan")],
            "topics": list(TOPICS),
            "rounds": 0,
        }

    def fan_out(state: State) -> list[Send]:
        return [Send("search", {"topic": topic}) for topic in state["topics"]]

    def search(arg: SearchInput, config: RunnableConfig) -> dict[str, Any]:
        seen("search", config, arg)
        topic = arg["topic"]
        return {
            "messages": [AIMessage(f"found: {topic}", id=f"m-search-{topic}")],
            "findings": [f"{topic} keeps a log"],
        }

    def draft(state: SummaryState, config: RunnableConfig) -> dict[str, Any]:
        seen("draft", config, state)
        return {"draft": " / ".join(sorted(state["findings"]))}

    def polish(state: SummaryState, config: RunnableConfig) -> dict[str, Any]:
        seen("polish", config, state)
        text = f"note ({state.get('rounds', 0)}): {state['draft']}"
        return {"draft": text, "messages": [AIMessage(text, id=f"m-draft-{state['rounds']}")]}

    summarize = StateGraph(SummaryState, output_schema=SummaryOutput)
    summarize.add_node("draft", draft)
    summarize.add_node("polish", polish)
    summarize.add_edge(START, "draft")
    summarize.add_edge("draft", "polish")
    summarize.add_edge("polish", END)

    def review(state: State, config: RunnableConfig) -> dict[str, Any]:
        seen("review", config, state)
        answer = interrupt({"draft": state["draft"], "round": state["rounds"]})
        if on_review is not None:
            on_review(answer)
        who = answer.get("by", "reviewer")
        verdict = "approved" if answer["approved"] else "rejected"
        return {
            "approved": bool(answer["approved"]),
            "messages": [
                HumanMessage(f"{verdict} by {who}", id=f"m-review-{state['rounds']}-{who}")
            ],
        }

    def after_review(state: State) -> str:
        return "publish" if state["approved"] else "revise"

    def revise(state: State, config: RunnableConfig) -> dict[str, Any]:
        seen("revise", config, state)
        rounds = state["rounds"] + 1
        text = f"{state['draft']} (revision {rounds})"
        return {
            "rounds": rounds,
            "draft": text,
            "messages": [AIMessage(text, id=f"m-rev-{rounds}")],
        }

    def publish(state: State, config: RunnableConfig) -> dict[str, Any]:
        seen("publish", config, state)
        return {"messages": [AIMessage(f"published: {state['draft']}", id="m-published")]}

    builder = StateGraph(State)
    builder.add_node("plan", plan)
    builder.add_node("search", search)
    builder.add_node("summarize", summarize.compile())
    builder.add_node("review", review)
    builder.add_node("revise", revise)
    builder.add_node("publish", publish)
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", fan_out, ["search"])
    builder.add_edge("search", "summarize")
    builder.add_edge("summarize", "review")
    builder.add_conditional_edges("review", after_review, ["publish", "revise"])
    builder.add_edge("revise", "review")
    builder.add_edge("publish", END)
    return builder.compile(checkpointer=checkpointer)


def answer_for(request: dict[str, Any], by: str = "reviewer") -> dict[str, Any]:
    """The reviewer's answer to an interrupt: reject round 0, approve later rounds."""
    return {"approved": request["round"] >= 1, "by": by}


def config_for(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def _next_call(snapshot: StateSnapshot) -> tuple[Any, bool]:
    """What moves a thread on from ``snapshot``: (the invoke input, whether it ended).

    No checkpoint yet: the input. Parked on an interrupt: ``Command(resume=...)``
    answering it. Tasks left: ``None``, which continues from the last
    checkpoint. A thread ends when its last checkpoint has no task left: not
    when ``next`` is empty, as LangGraph leaves out of ``next`` the tasks
    whose writes are all saved, though their successors have yet to run.
    """
    if not snapshot.values and not snapshot.tasks:
        return INPUT, False
    if snapshot.interrupts:
        (pending,) = snapshot.interrupts
        return Command(resume=answer_for(pending.value)), False
    return None, not snapshot.tasks


def drive_once(graph: Graph, thread_id: str, durability: str) -> bool:
    """Move a thread one call forward from whatever its saver holds; True once it ended."""
    config = config_for(thread_id)
    call, ended = _next_call(graph.get_state(config))
    if not ended:
        graph.invoke(call, config, durability=durability)  # type: ignore[arg-type]
    return not graph.get_state(config).tasks


async def adrive_once(graph: Graph, thread_id: str, durability: str) -> bool:
    """:func:`drive_once` through the async API (``ainvoke``, ``aget_state``)."""
    config = config_for(thread_id)
    call, ended = _next_call(await graph.aget_state(config))
    if not ended:
        await graph.ainvoke(call, config, durability=durability)  # type: ignore[arg-type]
    return not (await graph.aget_state(config)).tasks


@contextlib.contextmanager
def open_saver(kind: SaverKind, url: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """A saver of ``kind`` over the log at ``url`` (``sqlite:///path`` or ``kafka://...``)."""
    if kind == "memory":
        yield InMemorySaver()
    elif kind == "langgraph-sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        assert url.startswith("sqlite:///"), url
        with SqliteSaver.from_conn_string(url.removeprefix("sqlite:///")) as saver:
            yield saver
    else:
        from agentlog.langgraph import AgentlogSaver

        with AgentlogSaver.from_url(url) as saver:
            yield saver


@contextlib.asynccontextmanager
async def aopen_saver(kind: SaverKind, url: str) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """:func:`open_saver` for the async API (``langgraph-sqlite`` is sync only)."""
    if kind == "memory":
        yield InMemorySaver()
    else:
        assert kind == "agentlog", kind
        from agentlog.langgraph import AgentlogSaver

        async with AgentlogSaver.from_url(url) as saver:
            yield saver
