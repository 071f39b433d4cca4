"""LangGraph, only the checkpointer swapped: one graph on AgentlogSaver and on LangGraph's savers.

Every row here runs LangGraph's own engine; only the checkpointer changes.
(``bench_runtime`` races agentlog's whole runtime against LangGraph's engine
plus SqliteSaver: a different comparison, labelled as such there.)

1. **Checkpointer only.** The loop of ``benchmarks/bench_runtime.py`` (N
   steps, each appending the next message of ``bench_runtime.conversation``,
   :data:`benchmarks.payloads.PAYLOAD_BYTES` each, to a list), as a LangGraph
   ``StateGraph``, compiled with
   * ``AgentlogSaver`` on SQLite (``sqlite:///...``),
   * LangGraph's own ``SqliteSaver`` (the peer),
   * LangGraph's ``PostgresSaver`` and ``AgentlogSaver`` on PostgreSQL, when
     a server is given (each run on a fresh database),
   * ``AgentlogSaver`` on Kafka (``kafka://...``), on a real broker,
   for N = 100, 1,000, 3,000 in durability ``sync`` and ``async`` (``exit``
   writes one checkpoint per run, so it says nothing about growth). All run
   in this same process, one after the other for each N, so load on the
   machine hits them alike. A row gives the per-step time (median and p99 of
   the interval between the graph's consecutive ``updates``, which spans the
   node and its checkpoint) and ``total_ms_per_step`` (the whole ``stream``
   over N, including the final flush of async writes: in ``async`` the
   per-step interval shows only the foreground, as LangGraph queues each
   ``put`` behind the previous one in a thread, so the total is the figure
   to compare there), with its ratios to each peer at the same N and mode.
   Bytes are the SQLite folder after the saver closed (database, plus any WAL
   left); on PostgreSQL, ``pg_total_relation_size`` of each side's tables; on
   Kafka, the ``.log`` segment files of the log's topics on the broker's disk
   right after the run (before the broker's cleaner compacts the runs topic)
   when this module started the broker, else the sum of the records' key and
   value sizes read back from the topics (``kafka_bytes`` says which).
2. **Bounded state.** A 10,000-checkpoint thread whose state does not grow
   (one message, replaced each step, and a counter), so that the figures show
   the thread's length, not the state's size: bytes stored; ``get_tuple`` of
   the latest checkpoint **cold** (the first call on a fresh saver object) and
   **warm** (the calls after it on the same saver); and **opening a thread**
   (a fresh saver made, then its first ``get_tuple``). Each row carries its
   ratio to each peer (``vs_<peer>``: ours over theirs, so above 1 is worse).
   The thread is written in durability ``sync``; a saver that fails to build
   it gets a row that says why, with no figures.

Durability is pinned on each side, never left to defaults
(``benchmarks/durability.py``): SqliteSaver's connection gets WAL and
``synchronous=FULL`` set by the benchmark, as agentlog's SQLite log sets for
its durable commits; PostgresSaver's connection gets ``synchronous_commit =
on``, as agentlog's PostgreSQL log sets. Each loop row prints its side's
settings (``durability``).

Kafka uses ``KAFKA_BOOTSTRAP_SERVERS`` when set, otherwise a broker started
from the Maven jars by ``scripts/kafka_broker.py`` (as ``bench_kafka`` does);
PostgreSQL the server ``POSTGRES_URL`` names, else one started here
(``bench_postgres.databases``). Files go under ``.cache/bench`` in the repo,
on the same disk as the code.
"""

from __future__ import annotations

import math
import operator
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from agentlog import AgentlogError
from benchmarks import payloads
from benchmarks.bench_postgres import databases
from benchmarks.bench_runtime import conversation
from benchmarks.harness import Row, row_from_samples
from benchmarks.langgraph_savers import (
    PEER,
    Backend,
    Kafka,
    agentlog_kafka,
    agentlog_sqlite,
    broker,
    sqlite_saver,
)

__all__ = ["Backend", "Kafka", "LoopResult", "collect", "run", "run_loop"]

AREA = "langgraph"
POSTGRES_PEER = "PostgresSaver"
#: LangGraph's own savers: every other saver's row carries its ratios to each.
PEERS = (PEER, POSTGRES_PEER)
#: Rows of the loop: the same LangGraph graph, only the checkpointer swapped.
CHECKPOINTER_ONLY = "checkpointer only"


@dataclass(frozen=True)
class LoopResult:
    """One run of the loop: per-step seconds, the whole run's seconds, bytes stored."""

    step_s: list[float]
    total_s: float
    nbytes: int
    bytes_what: str

    @property
    def total_ms_per_step(self) -> float:
        return self.total_s / len(self.step_s) * 1e3


class _LoopState(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]
    n: int


class _WindowState(TypedDict):
    last: dict[str, Any]
    n: int


def _looping(
    schema: type[Any], steps: int, update: Callable[[dict[str, Any]], dict[str, Any]]
) -> StateGraph[Any]:
    """One node, run ``steps`` times; ``update(state)`` is what each run writes."""

    def node(state: dict[str, Any]) -> dict[str, Any]:
        return {**update(state), "n": state["n"] + 1}

    def route(state: dict[str, Any]) -> str:
        return "loop" if state["n"] < steps else END

    graph: StateGraph[Any] = StateGraph(schema)
    graph.add_node("loop", node)
    graph.add_edge(START, "loop")
    graph.add_conditional_edges("loop", route)
    return graph


def _loop_builder(steps: int) -> StateGraph[Any]:
    """The runtime benchmark's loop: each step appends the next message."""
    messages = conversation(steps)
    return _looping(_LoopState, steps, lambda state: {"messages": [messages[state["n"]]]})


def window_messages(steps: int) -> list[dict[str, Any]]:
    """The message each step of the bounded-state loop replaces the last one with."""
    r = payloads.rng("langgraph-window")
    return [payloads.conversation_message(r, i, payloads.PAYLOAD_BYTES) for i in range(steps)]


def _window_builder(steps: int) -> StateGraph[Any]:
    """A loop whose state stays one message and a counter: many checkpoints, a small state."""
    messages = window_messages(steps)
    return _looping(_WindowState, steps, lambda state: {"last": messages[state["n"]]})


def _stream(
    builder: StateGraph[Any], saver: BaseCheckpointSaver[Any], first: Any, steps: int, mode: str
) -> tuple[list[float], float]:
    """Run a graph to its end on ``saver``; the interval before each update, and the total."""
    app = builder.compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "bench"}, "recursion_limit": steps + 10}
    step_s: list[float] = []
    started = last = time.perf_counter()
    for _ in app.stream(first, config, durability=mode, stream_mode="updates"):  # type: ignore[arg-type]
        now = time.perf_counter()
        step_s.append(now - last)
        last = now
    total = time.perf_counter() - started
    assert len(step_s) == steps, (len(step_s), steps)
    return step_s, total


def run_loop(backend: Backend, steps: int, mode: str) -> LoopResult:
    """The message loop of ``steps`` steps on a fresh store of ``backend``."""
    try:
        with backend.opener() as saver:
            step_s, total = _stream(
                _loop_builder(steps), saver, {"messages": [], "n": 0}, steps, mode
            )
        nbytes, what = backend.measure()
        return LoopResult(step_s, total, nbytes, what)
    finally:
        backend.cleanup()


def _ratios(
    results: dict[str, Any], name: str, figure: Callable[[Any], float], key: str
) -> dict[str, Any]:
    """``name``'s figure over each peer's in ``results`` (peers get none): above 1 is worse."""
    if name in PEERS:
        return {}
    mine = figure(results[name])
    return {
        f"{key}{peer}": round(mine / max(figure(results[peer]), 1e-12), 2)
        for peer in PEERS
        if peer in results
    }


def _loop_rows(
    results: dict[tuple[str, str, int], LoopResult], sizes: list[int], durability: dict[str, str]
) -> list[Row]:
    """One row per (backend, mode, N), with its ratios against each peer at the same N."""
    rows: list[Row] = []
    small, large = min(sizes), max(sizes)
    for (backend, mode, n), res in results.items():
        extra: dict[str, Any] = {
            "total_ms_per_step": round(res.total_ms_per_step, 3),
            "MB": round(res.nbytes / 1e6, 3),
            "durability": durability[backend],
        }
        if backend == "agentlog kafka":
            extra["kafka_bytes"] = res.bytes_what
        peer = results.get((PEER, mode, n))
        if backend not in PEERS and peer is not None:
            extra["x_fewer_bytes"] = round(peer.nbytes / max(res.nbytes, 1), 1)
            extra["ms_vs_peer"] = round(res.total_ms_per_step / peer.total_ms_per_step, 2)
        same = {name: r for (name, m, size), r in results.items() if (m, size) == (mode, n)}
        extra |= _ratios(same, backend, lambda r: r.total_ms_per_step, "ms_vs_")
        first = results.get((backend, mode, small))
        if n == large and first is not None and large != small:
            extra[f"flat_N{large}/N{small}"] = round(
                res.total_ms_per_step / first.total_ms_per_step, 2
            )
            extra["flat_median"] = round(
                statistics.median(res.step_s) / statistics.median(first.step_s), 2
            )
            if backend not in PEERS:
                extra["target"] = ">=50x fewer bytes, ms_vs_peer<=1, flat<=1.5"
        name = f"{CHECKPOINTER_ONLY}, loop N={n} {mode}: {backend}"
        rows.append(row_from_samples(AREA, name, res.step_s, **extra))
    return rows


@dataclass(frozen=True)
class Bounded:
    """One saver's figures on the bounded-state thread (seconds), or why it failed."""

    nbytes: int = 0
    cold: tuple[float, ...] = ()
    """The first ``get_tuple`` on each fresh saver."""
    warm: tuple[float, ...] = ()
    """The calls after the first, on one saver."""
    opened: tuple[float, ...] = ()
    """A fresh saver made, then its first ``get_tuple``: opening the thread."""
    failed: str = ""


def bounded_thread(backend: Backend, checkpoints: int, fresh: int, warm: int) -> Bounded:
    """Build a ``checkpoints``-long thread of a bounded state, then read its latest checkpoint."""
    config: Any = {"configurable": {"thread_id": "bench"}}
    try:
        try:
            # Built in sync durability: a put that fails then stops the graph at
            # once, where async would queue every later put behind the failed one.
            with backend.opener() as saver:
                _stream(_window_builder(checkpoints), saver, {"n": 0}, checkpoints, "sync")
        except AgentlogError as exc:
            # The table shows the failure in place of the figures; the other rows still run.
            return Bounded(failed=str(exc)[:400])
        cold: list[float] = []
        opened: list[float] = []
        warm_s: list[float] = []
        for _ in range(fresh):
            start = time.perf_counter()
            with backend.opener() as saver:
                made = time.perf_counter()
                found = saver.get_tuple(config)
                done = time.perf_counter()
                assert found is not None and found.checkpoint["channel_values"]["n"] == checkpoints
                cold.append(done - made)
                opened.append(done - start)
                if not warm_s:
                    for _ in range(warm):
                        start = time.perf_counter()
                        saver.get_tuple(config)
                        warm_s.append(time.perf_counter() - start)
        nbytes, _ = backend.measure()
    finally:
        backend.cleanup()
    return Bounded(nbytes, tuple(cold), tuple(warm_s), tuple(opened))


def _median_of(what: str) -> Callable[[Bounded], float]:
    """The median of the samples a :class:`Bounded` holds under ``what``."""
    return lambda bounded: statistics.median(getattr(bounded, what))


def _bounded_rows(results: dict[str, Bounded], checkpoints: int) -> list[Row]:
    """Bytes, cold, warm and open rows for each saver, each with its ratios to the peers."""
    thread = f"bounded state, {checkpoints:,}-checkpoint thread"
    done = {name: b for name, b in results.items() if not b.failed}
    rows: list[Row] = []
    for name, bounded in results.items():
        if bounded.failed:
            rows.append(
                Row(AREA, f"{thread}: {name}", "ms", math.nan, None, {"failed": bounded.failed})
            )
            continue
        rows.append(
            Row(
                AREA,
                f"{thread}, bytes stored: {name}",
                "MB",
                bounded.nbytes / 1e6,
                None,
                _ratios(done, name, lambda b: b.nbytes, "vs_"),
                n=1,
            )
        )
        for what, label in (
            ("cold", "get_tuple cold (first call, fresh saver)"),
            ("warm", "get_tuple warm (same saver)"),
            ("opened", "open a thread (fresh saver + first get_tuple)"),
        ):
            ratios = _ratios(done, name, _median_of(what), "vs_")
            samples = list(getattr(bounded, what))
            rows.append(row_from_samples(AREA, f"{thread}, {label}: {name}", samples, **ratios))
    return rows


def _postgres_makers(new_database: Callable[[], str]) -> list[Callable[[], Backend]]:
    """PostgresSaver and AgentlogSaver, each on a fresh database of the server."""
    # imported here: bench_langgraph_postgres builds on this module's Backend
    from benchmarks.bench_langgraph_postgres import agentlog_postgres, postgres_saver

    return [lambda: postgres_saver(new_database()), lambda: agentlog_postgres(new_database())]


def run(
    sizes: list[int],
    modes: list[str],
    checkpoints: int,
    kafka: Kafka | None,
    *,
    fresh: int = 10,
    warm: int = 200,
    new_database: Callable[[], str] | None = None,
) -> list[Row]:
    """Every row of this module, for these sizes and modes; Kafka rows when ``kafka`` is
    given, PostgreSQL rows when ``new_database`` (a maker of fresh database URLs) is."""
    makers: list[Callable[[], Backend]] = [sqlite_saver, agentlog_sqlite]
    if new_database is not None:
        makers += _postgres_makers(new_database)
    if kafka is not None:
        makers.append(lambda: agentlog_kafka(kafka))
    results: dict[tuple[str, str, int], LoopResult] = {}
    durability: dict[str, str] = {}
    for mode in modes:
        for n in sizes:
            for make in makers:
                backend = make()
                durability[backend.name] = backend.durability
                results[(backend.name, mode, n)] = run_loop(backend, n, mode)
    rows = _loop_rows(results, sizes, durability)
    bounded: dict[str, Bounded] = {}
    for make in makers:
        backend = make()
        bounded[backend.name] = bounded_thread(backend, checkpoints, fresh, warm)
    return rows + _bounded_rows(bounded, checkpoints)


def collect(quick: bool) -> list[Row]:
    """Run the LangGraph benchmarks (see the module docstring)."""
    sizes = [50, 200] if quick else [100, 1000, 3000]
    checkpoints = 500 if quick else 10_000
    with broker() as kafka, databases("lgbench") as new_database:
        return run(
            sizes,
            ["sync", "async"],
            checkpoints,
            kafka,
            fresh=5 if quick else 10,
            new_database=new_database,
        )
