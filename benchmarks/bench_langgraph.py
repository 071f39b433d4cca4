"""LangGraph on agentlog: the runtime benchmark's loop run by LangGraph with three checkpointers.

1. The loop of ``benchmarks/bench_runtime.py`` (N steps, each appending the
   next ~500-byte message of ``bench_runtime.conversation`` to a list), as a
   LangGraph ``StateGraph``, compiled with
   * ``AgentlogSaver`` on SQLite (``sqlite:///...``),
   * LangGraph's own ``SqliteSaver`` (the peer),
   * ``AgentlogSaver`` on Kafka (``kafka://...``), on a real broker,
   for N = 100, 1,000, 3,000 in durability ``sync`` and ``async`` (``exit``
   writes one checkpoint per run, so it says nothing about growth). All
   three run in this same process, one after the other for each N, so load
   on the machine hits them alike. A row gives the per-step time (median and
   p99 of the interval between the graph's consecutive ``updates``, which
   spans the node and its checkpoint) and ``total_ms_per_step`` (the whole
   ``stream`` over N, including the final flush of async writes: in
   ``async`` the per-step interval shows only the foreground, as LangGraph
   queues each ``put`` behind the previous one in a thread, so the total is
   the figure to compare there). Bytes are
   the SQLite folder after the saver closed (database, plus any WAL left);
   on Kafka, the ``.log`` segment files of the log's topics on the broker's
   disk right after the run (before the broker's cleaner compacts the runs
   topic) when this module started the broker, else the sum of the records'
   key and value sizes read back from the topics (``kafka_bytes`` says
   which). Targets at N = 3,000: >= 50x fewer bytes than SqliteSaver,
   ms/step no worse, ms/step at the largest N within 1.5x of the smallest.
2. ``get_tuple`` of the latest checkpoint of a 10,000-checkpoint thread
   whose state is one 500-byte message (replaced each step) and a counter, so
   that the read's cost shows the thread's length, not the state's size:
   ``cold`` is the first call on a fresh saver object (opening it is not
   timed, and is shown as ``open_ms``), ``warm`` the calls after it on the
   same saver. Target < 5 ms. The thread is written in durability ``sync``;
   a saver that fails to build it gets a row that says why, with no figures.

Kafka uses ``KAFKA_BOOTSTRAP_SERVERS`` when set, otherwise a broker started
from the Maven jars by ``scripts/kafka_broker.py`` (as ``bench_kafka`` does).
Files go under ``.cache/bench`` in the repo, on the same disk as the code.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import operator
import shutil
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from agentlog.errors import AgentlogError
from agentlog.langgraph import AgentlogSaver
from benchmarks import payloads
from benchmarks.bench_runtime import MESSAGE_BYTES, conversation
from benchmarks.harness import Row, kafka_broker, percentile, row_from_samples

AREA = "langgraph"
ROOT = Path(__file__).resolve().parent.parent / ".cache" / "bench"
PEER = "SqliteSaver"

#: Opens a saver, yields it and closes it: a fresh object on every call.
Opener = Callable[[], contextlib.AbstractContextManager[BaseCheckpointSaver[Any]]]


@dataclass(frozen=True)
class Kafka:
    """A broker to run the Kafka side on."""

    bootstrap: str
    """``host:port`` for clients."""
    data_dir: Path | None
    """The broker's log dir when this module started it (bytes are then read
    from its segment files), None for a broker given by the environment."""


@dataclass(frozen=True)
class Backend:
    """One checkpointer under test: how to open it and how to count its bytes."""

    name: str
    opener: Opener
    measure: Callable[[], tuple[int, str]]
    """Bytes stored so far, and what was counted."""
    cleanup: Callable[[], None]


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


def _window_builder(steps: int) -> StateGraph[Any]:
    """A loop whose state stays one message and a counter: many checkpoints, a small state."""
    r = payloads.rng("langgraph-window")
    messages = [payloads.conversation_message(r, i, MESSAGE_BYTES) for i in range(steps)]
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


def _workdir() -> Path:
    ROOT.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=ROOT))


def _folder_bytes(folder: Path) -> tuple[int, str]:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()), "files after close"


def sqlite_saver() -> Backend:
    """LangGraph's SqliteSaver on a new file."""
    folder = _workdir()

    @contextlib.contextmanager
    def opener() -> Iterator[BaseCheckpointSaver[Any]]:
        conn = sqlite3.connect(folder / "langgraph.db", check_same_thread=False)
        try:
            yield SqliteSaver(conn)
        finally:
            conn.close()

    return Backend(PEER, opener, lambda: _folder_bytes(folder), lambda: shutil.rmtree(folder, True))


def agentlog_sqlite() -> Backend:
    """AgentlogSaver on a new SQLite event log."""
    folder = _workdir()
    url = f"sqlite:///{folder / 'agentlog.db'}"
    return Backend(
        "agentlog sqlite",
        lambda: AgentlogSaver.from_url(url),
        lambda: _folder_bytes(folder),
        lambda: shutil.rmtree(folder, True),
    )


def agentlog_kafka(kafka: Kafka) -> Backend:
    """AgentlogSaver on new topics of the broker."""
    name = f"lgbench{uuid.uuid4().hex[:8]}"
    url = f"kafka://{kafka.bootstrap}/{name}"
    return Backend(
        "agentlog kafka",
        lambda: AgentlogSaver.from_url(url),
        lambda: kafka_bytes(kafka, name),
        lambda: None,
    )


def kafka_bytes(kafka: Kafka, name: str) -> tuple[int, str]:
    """Bytes the log ``name`` holds on the broker, and what was counted."""
    if kafka.data_dir is not None:
        segments = [
            p for folder in kafka.data_dir.glob(f"{name}.*-*") for p in folder.glob("*.log")
        ]
        return sum(p.stat().st_size for p in segments), "log segments on broker disk"
    return asyncio.run(_record_bytes(kafka.bootstrap, name)), "sum of record key+value"


async def _record_bytes(bootstrap: str, name: str) -> int:
    """The key and value bytes of every record in the topics ``name.*``, read back."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        topics = [t for t in await admin.list_topics() if t.startswith(f"{name}.")]
        parts = [
            TopicPartition(t["topic"], p["partition"])
            for t in await admin.describe_topics(topics)
            for p in t["partitions"]
        ]
    finally:
        await admin.close()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        ends = await consumer.end_offsets(parts)
        total = 0
        while [tp for tp in parts if await consumer.position(tp) < ends[tp]]:
            batches = await consumer.getmany(timeout_ms=1000)
            for records in batches.values():
                total += sum(len(r.key or b"") + len(r.value or b"") for r in records)
        return total
    finally:
        await consumer.stop()


def _loop_rows(results: dict[tuple[str, str, int], LoopResult], sizes: list[int]) -> list[Row]:
    """One row per (backend, mode, N), with its ratios against SqliteSaver at the same N."""
    rows: list[Row] = []
    small, large = min(sizes), max(sizes)
    for (backend, mode, n), res in results.items():
        extra: dict[str, Any] = {
            "total_ms_per_step": round(res.total_ms_per_step, 3),
            "MB": round(res.nbytes / 1e6, 3),
        }
        if backend == "agentlog kafka":
            extra["kafka_bytes"] = res.bytes_what
        peer = results.get((PEER, mode, n))
        if backend != PEER and peer is not None:
            extra["x_fewer_bytes"] = round(peer.nbytes / max(res.nbytes, 1), 1)
            extra["ms_vs_peer"] = round(res.total_ms_per_step / peer.total_ms_per_step, 2)
        first = results.get((backend, mode, small))
        if n == large and first is not None and large != small:
            extra[f"flat_N{large}/N{small}"] = round(
                res.total_ms_per_step / first.total_ms_per_step, 2
            )
            extra["flat_median"] = round(
                statistics.median(res.step_s) / statistics.median(first.step_s), 2
            )
            if backend != PEER:
                extra["target"] = ">=50x fewer bytes, ms_vs_peer<=1, flat<=1.5"
        rows.append(row_from_samples(AREA, f"loop N={n} {mode}: {backend}", res.step_s, **extra))
    return rows


def get_tuple_rows(backend: Backend, checkpoints: int, fresh: int, warm: int) -> Row:
    """``get_tuple`` of the latest checkpoint of a ``checkpoints``-long thread, cold then warm."""
    config: Any = {"configurable": {"thread_id": "bench"}}
    name = f"get_tuple latest of {checkpoints:,}-checkpoint thread, cold: {backend.name}"
    try:
        try:
            # Built in sync durability: a put that fails then stops the graph at
            # once, where async would queue every later put behind the failed one.
            with backend.opener() as saver:
                _stream(_window_builder(checkpoints), saver, {"n": 0}, checkpoints, "sync")
        except AgentlogError as exc:
            # The table shows the failure in place of the figures; the other rows still run.
            return Row(AREA, name, "ms", math.nan, None, {"failed": str(exc)[:400]})
        cold: list[float] = []
        opens: list[float] = []
        warm_s: list[float] = []
        for _ in range(fresh):
            start = time.perf_counter()
            with backend.opener() as saver:
                opened = time.perf_counter()
                found = saver.get_tuple(config)
                done = time.perf_counter()
                assert found is not None and found.checkpoint["channel_values"]["n"] == checkpoints
                opens.append(opened - start)
                cold.append(done - opened)
                if not warm_s:
                    for _ in range(warm):
                        start = time.perf_counter()
                        saver.get_tuple(config)
                        warm_s.append(time.perf_counter() - start)
        nbytes, _ = backend.measure()
    finally:
        backend.cleanup()
    return row_from_samples(
        AREA,
        name,
        cold,
        open_ms=round(statistics.median(opens) * 1e3, 2),
        warm_median_ms=round(statistics.median(warm_s) * 1e3, 3),
        warm_p99_ms=round(percentile(warm_s, 99) * 1e3, 3),
        MB=round(nbytes / 1e6, 2),
        target="<5ms",
    )


def run(
    sizes: list[int],
    modes: list[str],
    checkpoints: int,
    kafka: Kafka | None,
    *,
    fresh: int = 10,
    warm: int = 200,
) -> list[Row]:
    """Every row of this module, for these sizes and modes; Kafka rows when ``kafka`` is given."""
    makers: list[Callable[[], Backend]] = [sqlite_saver, agentlog_sqlite]
    if kafka is not None:
        makers.append(lambda: agentlog_kafka(kafka))
    results: dict[tuple[str, str, int], LoopResult] = {}
    for mode in modes:
        for n in sizes:
            for make in makers:
                backend = make()
                results[(backend.name, mode, n)] = run_loop(backend, n, mode)
    rows = _loop_rows(results, sizes)
    for make in makers:
        rows.append(get_tuple_rows(make(), checkpoints, fresh, warm))
    return rows


@contextlib.contextmanager
def broker() -> Iterator[Kafka]:
    """The broker named by KAFKA_BOOTSTRAP_SERVERS, or one started here and stopped after."""
    with kafka_broker("agentlog-lg-bench-") as (bootstrap, data):
        yield Kafka(bootstrap, data)


def collect(quick: bool) -> list[Row]:
    """Run the LangGraph benchmarks (see the module docstring)."""
    sizes = [50, 200] if quick else [100, 1000, 3000]
    checkpoints = 500 if quick else 10_000
    with broker() as kafka:
        return run(sizes, ["sync", "async"], checkpoints, kafka, fresh=5 if quick else 10)
