"""A real LangGraph graph on agentlog's saver, under each durability mode.

The graph (tests/langgraph/graphs/graphs.py) has a message list, a conditional
edge, parallel Send nodes, a subgraph and two interrupts answered with
``Command(resume=...)``. Each call that moves the thread on opens a NEW saver
object (and compiles the graph again), so every resume reads only what the
log holds. The thread must end as the same graph ends on LangGraph's
InMemorySaver: the same final state, the same interrupts while parked, and the
same history, checkpoint by checkpoint (values and pending writes) in every
namespace, as one linear chain per namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from tests.langgraph.graphs.checks import assert_linear, thread_shape
from tests.langgraph.graphs.graphs import (
    DURABILITIES,
    SaverKind,
    adrive_once,
    aopen_saver,
    build_graph,
    config_for,
    drive_once,
    open_saver,
    plain,
)

#: The saver under test.
SAVER: SaverKind = "agentlog"
#: A hang guard: the thread parks twice, so it ends within a few calls.
MAX_CALLS = 10


@dataclass
class Trace:
    """What a thread showed along the way."""

    parks: list[Any] = field(default_factory=list)
    final: Any = None
    shape: Any = None
    checkpoints: int = 0


def _park(graph: Any, thread_id: str, trace: Trace) -> None:
    snapshot = graph.get_state(config_for(thread_id))
    assert snapshot.next, "an unfinished thread names its next nodes"
    tasks = [(t.name, [i.value for i in t.interrupts]) for t in snapshot.tasks if t.interrupts]
    trace.parks.append(([i.value for i in snapshot.interrupts], tasks, snapshot.next))


def run_sync(kind: SaverKind, url: str, thread_id: str, durability: str) -> Trace:
    """Drive the thread to its end, one new saver (and graph) per call."""
    trace = Trace()
    memory = InMemorySaver()  # the reference has no log to reopen: it keeps one saver

    def saver() -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext(memory) if kind == "memory" else open_saver(kind, url)

    for _ in range(MAX_CALLS):
        with saver() as opened:
            graph = build_graph(opened)
            if drive_once(graph, thread_id, durability):
                break
            _park(graph, thread_id, trace)
    else:
        pytest.fail(f"the thread did not end in {MAX_CALLS} calls")
    with saver() as opened:
        _finish(build_graph(opened), opened, thread_id, trace)
    return trace


async def run_async(kind: SaverKind, url: str, thread_id: str, durability: str) -> Trace:
    """:func:`run_sync` through the async API (``ainvoke``, ``aget_state``)."""
    trace = Trace()
    for _ in range(MAX_CALLS):
        async with aopen_saver(kind, url) as saver:
            graph = build_graph(saver)
            if await adrive_once(graph, thread_id, durability):
                break
            _park(graph, thread_id, trace)
    else:
        pytest.fail(f"the thread did not end in {MAX_CALLS} calls")
    with open_saver(kind, url) as saver:
        _finish(build_graph(saver), saver, thread_id, trace)
    return trace


def _finish(graph: Any, saver: Any, thread_id: str, trace: Trace) -> None:
    snapshot = graph.get_state(config_for(thread_id))
    assert not snapshot.tasks and not snapshot.interrupts
    trace.final = plain(snapshot.values)
    trace.shape = thread_shape(saver, thread_id)
    trace.checkpoints = assert_linear(saver, thread_id)
    history = list(graph.get_state_history(config_for(thread_id)))
    assert [h.config for h in history[1:]] == [h.parent_config for h in history[:-1]]
    assert history[-1].parent_config is None


_REFERENCE: dict[str, Trace] = {}


def reference(durability: str) -> Trace:
    """The same graph on LangGraph's InMemorySaver, same durability."""
    if durability not in _REFERENCE:
        _REFERENCE[durability] = run_sync("memory", "", "reference", durability)
    return _REFERENCE[durability]


def check(trace: Trace, durability: str) -> None:
    expected = reference(durability)
    assert len(trace.parks) == 2, "the thread parks on both interrupts"
    assert trace.parks == expected.parks
    assert trace.final == expected.final
    assert trace.checkpoints == expected.checkpoints
    assert trace.shape == expected.shape


@pytest.mark.parametrize("durability", DURABILITIES)
def test_graph_on_sqlite(durability: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'agentlog.db'}"
    check(run_sync(SAVER, url, "t-sync", durability), durability)


@pytest.mark.parametrize("durability", DURABILITIES)
def test_graph_on_sqlite_async_api(durability: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'agentlog.db'}"
    check(asyncio.run(run_async(SAVER, url, "t-async", durability)), durability)


def test_threads_share_one_log(tmp_path: Path) -> None:
    """Two threads in one log file, interleaved call by call, do not see each other."""
    url = f"sqlite:///{tmp_path / 'agentlog.db'}"
    done: set[str] = set()
    for _ in range(MAX_CALLS):
        for thread_id in ("left", "right"):
            if thread_id not in done:
                with open_saver(SAVER, url) as saver:
                    if drive_once(build_graph(saver), thread_id, "sync"):
                        done.add(thread_id)
    assert done == {"left", "right"}
    with open_saver(SAVER, url) as saver:
        for thread_id in ("left", "right"):
            trace = Trace()
            _finish(build_graph(saver), saver, thread_id, trace)
            assert trace.final == reference("sync").final
            assert trace.shape == reference("sync").shape


@pytest.mark.kafka
@pytest.mark.parametrize("durability", DURABILITIES)
def test_graph_on_kafka(durability: str, kafka_bootstrap: str) -> None:
    url = f"kafka://{kafka_bootstrap}/lg{uuid.uuid4().hex[:10]}"
    check(run_sync(SAVER, url, "t-kafka", durability), durability)
