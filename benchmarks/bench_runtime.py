"""Runtime benchmarks: the cost of a durable step; agentlog's runtime next to LangGraph and DBOS.

1. Per-step cost of a one-step loop on SQLite in each durability mode, against
   a plain Python loop doing the same work, against one raw sqlite3 INSERT +
   COMMIT of the same message with synchronous=FULL, and beside the physical
   floor measured in the same run (``benchmarks/floor.py``: one fsync'd
   SQLite WAL commit of a small INSERT, and ``os.fsync`` after a small append
   to a file), with the sync step's ratio to each.
2. The loop of N steps that each append a message of
   :data:`benchmarks.payloads.PAYLOAD_BYTES` to a list, run by **agentlog's
   runtime** and by **LangGraph's engine with its SqliteSaver** in this same
   process: time per step and bytes on disk, for N = 100, 1,000, 3,000 and
   durability sync and async. This races two whole stacks (engine and
   storage) against each other; the comparison with only the checkpointer
   swapped, under the same LangGraph engine, is ``bench_langgraph``'s. In the
   sync rows DBOS runs the loop too, in the same process, as a durable
   workflow of ``@DBOS.step()`` functions on its SQLite system database
   (``benchmarks/peer_dbos.py``), once in its own rollback-journal mode and
   once in WAL mode: DBOS checkpoints every step before the next one starts
   and has no deferred mode, so it has no async row.

Durability is pinned on every side, never left to defaults
(``benchmarks/durability.py``): SqliteSaver's connection and DBOS's get
``synchronous=FULL`` set by the benchmark, and WAL (DBOS also in ``delete``),
as agentlog's SQLite log sets for its durable commits; each row prints the
settings each side ran with.

Every side appends the very same messages: an agent's conversation from
``benchmarks/payloads.py`` (user and assistant turns of random words, tool
calls with JSON arguments, search results), every one different, so that no
store gains from compressing repeated bytes. A loop row times one run of
each side (``n=1``); the step rows' median and p99 are over several runs.

Files go under ``.cache/bench`` in the repo, on the same disk as the code.
"""

from __future__ import annotations

import asyncio
import json
import operator
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from agentlog.eventlog import open_log
from agentlog.runtime import Next, Runtime, RuntimeConfig, StepContext, Workflow, end, goto
from benchmarks import payloads
from benchmarks.durability import (
    AGENTLOG_SQLITE,
    file_journal_mode,
    pin_sqlite,
    sqlite_settings,
)
from benchmarks.floor import Floors
from benchmarks.harness import Row, row_from_samples, time_calls
from benchmarks.peer_dbos import JOURNAL_MODES, dbos_loop

AREA = "runtime"
ROOT = Path(__file__).resolve().parent.parent / ".cache" / "bench"
#: The two stacks the loop rows race; ``bench_langgraph`` swaps only the checkpointer.
VERSUS_LANGGRAPH = "agentlog runtime vs LangGraph engine + SqliteSaver"


def _workdir() -> Path:
    ROOT.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=ROOT))


def _disk_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def conversation(steps: int) -> list[dict[str, Any]]:
    """The ``steps`` messages the loop appends, one per step: the same on every call."""
    r = payloads.rng("runtime-loop")
    return [payloads.conversation_message(r, i, payloads.PAYLOAD_BYTES) for i in range(steps)]


def loop_workflow(steps: int) -> Workflow:
    """One step that appends the next message and loops ``steps`` times."""
    wf = Workflow("bench-loop", state={"messages": "append", "n": "replace"}, max_steps=steps + 10)
    messages = conversation(steps)

    @wf.step
    async def loop(ctx: StepContext) -> Next:
        n = ctx.state.get("n", 0) + 1
        if n >= steps:
            return end(messages=[messages[n - 1]], n=n)
        return goto("loop", messages=[messages[n - 1]], n=n)

    return wf


async def _agentlog_loop(steps: int, durability: str) -> tuple[float, int]:
    """Seconds per step and bytes on disk for one run of the loop."""
    folder = _workdir()
    try:
        event_log = await open_log(f"sqlite:///{folder / 'agentlog.db'}")
        wf = loop_workflow(steps)
        async with Runtime(event_log, workflows=[wf], config=RuntimeConfig()) as runtime:
            started = time.perf_counter()
            await runtime.start(wf, run_id="bench", durability=durability)
            state = await runtime.wait("bench")
            elapsed = time.perf_counter() - started
        assert state.status == "completed" and state.steps == steps, state.status
        await event_log.close()
        journal = file_journal_mode(folder / "agentlog.db")
        if journal != "wal":
            raise RuntimeError(f"agentlog's SQLite log ran journal_mode={journal}, not wal")
        return elapsed / steps, _disk_bytes(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class _LoopState(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]
    n: int


def _langgraph_loop(steps: int, durability: str) -> tuple[float, int, str]:
    """The same loop in LangGraph with its SQLite checkpointer: seconds per step,
    bytes on disk, and the SQLite settings its connection ran with (pinned here)."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    folder = _workdir()
    messages = conversation(steps)
    try:

        def node(state: _LoopState) -> dict[str, Any]:
            return {"messages": [messages[state["n"]]], "n": state["n"] + 1}

        def route(state: _LoopState) -> str:
            return "loop" if state["n"] < steps else END

        graph = StateGraph(_LoopState)
        graph.add_node("loop", node)
        graph.add_edge(START, "loop")
        graph.add_conditional_edges("loop", route)
        conn = sqlite3.connect(folder / "langgraph.db", check_same_thread=False)
        pin_sqlite(conn, "wal")
        app = graph.compile(checkpointer=SqliteSaver(conn))
        config: Any = {"configurable": {"thread_id": "bench"}, "recursion_limit": steps + 10}
        started = time.perf_counter()
        result = app.invoke({"messages": [], "n": 0}, config, durability=durability)
        elapsed = time.perf_counter() - started
        assert result["n"] == steps
        settings = sqlite_settings(conn)
        conn.close()
        return elapsed / steps, _disk_bytes(folder), settings
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _dbos_loop(steps: int, journal_mode: str) -> tuple[float, int, str]:
    """The same loop as a DBOS durable workflow on its SQLite system database."""
    folder = _workdir()
    try:
        seconds, settings = dbos_loop(conversation(steps), folder / "dbos.sqlite", journal_mode)
        return seconds, _disk_bytes(folder), settings
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _raw_commit_seconds(repeat: int) -> list[float]:
    folder = _workdir()
    conn = sqlite3.connect(folder / "raw.db", isolation_level=None)
    pin_sqlite(conn, "wal")
    conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
    rows = iter(
        json.dumps(m, separators=(",", ":")).encode() for m in conversation(repeat + 10) * 2
    )

    def commit() -> None:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO t (v) VALUES (?)", (next(rows),))
        conn.execute("COMMIT")

    try:
        return time_calls(commit, repeat)
    finally:
        conn.close()
        shutil.rmtree(folder, ignore_errors=True)


def _plain_loop_seconds(steps: int) -> float:
    messages = conversation(steps)
    started = time.perf_counter()
    state: dict[str, Any] = {"messages": [], "n": 0}
    while state["n"] < steps:
        state = {"messages": [*state["messages"], messages[state["n"]]], "n": state["n"] + 1}
    return (time.perf_counter() - started) / steps


def _loop_rows(n: int, mode: str) -> list[Row]:
    """The loop of ``n`` steps in ``mode``: agentlog's runtime against LangGraph's
    stack, and (sync) against DBOS in each journal mode; one run each."""
    ours, our_bytes = asyncio.run(_agentlog_loop(n, mode))
    theirs, their_bytes, their_settings = _langgraph_loop(n, mode)
    rows = [
        Row(
            AREA,
            f"loop N={n} {mode}: {VERSUS_LANGGRAPH}",
            "ms/step",
            ours * 1e3,
            None,
            {
                "langgraph_ms_per_step": round(theirs * 1e3, 3),
                "speedup": round(theirs / ours, 1),
                "agentlog_MB": round(our_bytes / 1e6, 2),
                "langgraph_MB": round(their_bytes / 1e6, 1),
                "bytes_ratio": round(their_bytes / max(our_bytes, 1), 0),
                "agentlog_sqlite": AGENTLOG_SQLITE,
                "sqlitesaver_sqlite": their_settings,
            },
            n=1,
        )
    ]
    if mode != "sync":
        return rows
    for journal in JOURNAL_MODES:
        dbos, dbos_bytes, dbos_settings = _dbos_loop(n, journal)
        rows.append(
            Row(
                AREA,
                f"loop N={n} sync: agentlog runtime vs DBOS workflow ({journal} journal)",
                "ms/step",
                ours * 1e3,
                None,
                {
                    "dbos_ms_per_step": round(dbos * 1e3, 3),
                    "dbos_speedup": round(dbos / ours, 2),
                    "agentlog_MB": round(our_bytes / 1e6, 2),
                    "dbos_MB": round(dbos_bytes / 1e6, 2),
                    "dbos_bytes_ratio": round(dbos_bytes / max(our_bytes, 1), 2),
                    "agentlog_sqlite": AGENTLOG_SQLITE,
                    "dbos_sqlite": dbos_settings,
                },
                n=1,
            )
        )
    return rows


def collect(quick: bool) -> list[Row]:
    """Run the runtime benchmarks (see the module docstring)."""
    rows: list[Row] = []
    steps, runs = (200, 3) if quick else (1000, 5)
    folder = _workdir()
    try:
        floors = Floors(AREA, folder, 100 if quick else 300)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    rows.extend(floors.rows)
    raw = _raw_commit_seconds(100 if quick else 300)
    raw_median = statistics.median(raw)
    rows.append(
        row_from_samples(
            AREA,
            f"raw sqlite3 INSERT+COMMIT of one {payloads.PAYLOAD_BYTES} B message (WAL, FULL)",
            raw,
            unit="us",
            **floors.ratios(raw),
        )
    )
    plain = [_plain_loop_seconds(steps) for _ in range(runs)]
    rows.append(row_from_samples(AREA, f"plain python loop step (N={steps})", plain, unit="us"))
    for mode in ("sync", "async", "exit"):
        samples = [asyncio.run(_agentlog_loop(steps, mode))[0] for _ in range(runs)]
        median = statistics.median(samples)
        floor = floors.ratios(samples) if mode == "sync" else {}
        rows.append(
            row_from_samples(
                AREA,
                f"agentlog step, {mode} (N={steps}, median of {runs} runs' mean step)",
                samples,
                unit="us",
                vs_raw_commit=round(median / raw_median, 2),
                **floor,
                vs_plain_loop=round(median / statistics.median(plain), 1),
                target="sync <= 2x raw commit" if mode == "sync" else "",
            )
        )
    sizes = (100, 1000) if quick else (100, 1000, 3000)
    for mode in ("sync", "async"):
        for n in sizes:
            rows.extend(_loop_rows(n, mode))
    return rows
