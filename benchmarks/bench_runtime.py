"""Runtime benchmarks: the cost of a durable step, and agentlog next to LangGraph and DBOS.

1. Per-step cost of a one-step loop on SQLite in each durability mode, against
   a plain Python loop doing the same work and against one raw sqlite3
   INSERT + COMMIT with synchronous=FULL (the disk's floor for a durable step).
2. The loop of N steps that each append a message of about 500 bytes to a
   list, run by agentlog and by LangGraph (StateGraph + SqliteSaver) in this
   same process: time per step and bytes on disk, for N = 100, 1,000, 3,000
   and durability sync and async. In the sync rows DBOS runs the loop too, in
   the same process, as a durable workflow of ``@DBOS.step()`` functions on
   its SQLite system database (``benchmarks/peer_dbos.py``): DBOS checkpoints
   every step before the next one starts and has no deferred mode, so it has
   no async row.

Every side appends the very same messages: an agent's conversation from
``benchmarks/payloads.py`` (user and assistant turns of random words, tool
calls with JSON arguments, search results), every one different, so that no
store gains from compressing repeated bytes.

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

from agentlog.eventlog.sqlite._log import SqliteEventLog
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end, goto
from agentlog.runtime._workflow import Next
from benchmarks import payloads
from benchmarks.harness import Row, row_from_samples, time_calls
from benchmarks.peer_dbos import dbos_loop

AREA = "runtime"
MESSAGE_BYTES = 500
ROOT = Path(__file__).resolve().parent.parent / ".cache" / "bench"


def _workdir() -> Path:
    ROOT.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=ROOT))


def _disk_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def conversation(steps: int) -> list[dict[str, Any]]:
    """The ``steps`` messages the loop appends, one per step: the same on every call."""
    r = payloads.rng("runtime-loop")
    return [payloads.conversation_message(r, i, MESSAGE_BYTES) for i in range(steps)]


def loop_workflow(steps: int) -> Workflow:
    """One step that appends the next ~500-byte message and loops ``steps`` times."""
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
        event_log = SqliteEventLog(str(folder / "agentlog.db"))
        wf = loop_workflow(steps)
        async with Runtime(event_log, workflows=[wf], config=RuntimeConfig()) as runtime:
            started = time.perf_counter()
            await runtime.start(wf, run_id="bench", durability=durability)
            state = await runtime.wait("bench")
            elapsed = time.perf_counter() - started
        assert state.status == "completed" and state.steps == steps, state.status
        await event_log.close()
        return elapsed / steps, _disk_bytes(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class _LoopState(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]
    n: int


def _langgraph_loop(steps: int, durability: str) -> tuple[float, int]:
    """The same loop in LangGraph with its SQLite checkpointer."""
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
        app = graph.compile(checkpointer=SqliteSaver(conn))
        config: Any = {"configurable": {"thread_id": "bench"}, "recursion_limit": steps + 10}
        started = time.perf_counter()
        result = app.invoke({"messages": [], "n": 0}, config, durability=durability)
        elapsed = time.perf_counter() - started
        assert result["n"] == steps
        conn.close()
        return elapsed / steps, _disk_bytes(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _dbos_loop(steps: int) -> tuple[float, int]:
    """The same loop as a DBOS durable workflow on its SQLite system database."""
    folder = _workdir()
    try:
        seconds = dbos_loop(conversation(steps), folder / "dbos.sqlite")
        return seconds, _disk_bytes(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _raw_commit_seconds(repeat: int) -> list[float]:
    folder = _workdir()
    conn = sqlite3.connect(folder / "raw.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
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


def collect(quick: bool) -> list[Row]:
    """Run the runtime benchmarks (see the module docstring)."""
    rows: list[Row] = []
    steps, runs = (200, 3) if quick else (1000, 5)
    raw = _raw_commit_seconds(100 if quick else 300)
    raw_median = statistics.median(raw)
    rows.append(row_from_samples(AREA, "raw sqlite3 INSERT+COMMIT (FULL)", raw, unit="us"))
    plain = [_plain_loop_seconds(steps) for _ in range(runs)]
    rows.append(row_from_samples(AREA, f"plain python loop step (N={steps})", plain, unit="us"))
    for mode in ("sync", "async", "exit"):
        samples = [asyncio.run(_agentlog_loop(steps, mode))[0] for _ in range(runs)]
        median = statistics.median(samples)
        rows.append(
            row_from_samples(
                AREA,
                f"agentlog step, {mode} (N={steps})",
                samples,
                unit="us",
                vs_raw_commit=round(median / raw_median, 2),
                vs_plain_loop=round(median / statistics.median(plain), 1),
                target="sync <= 2x raw commit" if mode == "sync" else "",
            )
        )
    sizes = (100, 1000) if quick else (100, 1000, 3000)
    for mode in ("sync", "async"):
        for n in sizes:
            ours, our_bytes = asyncio.run(_agentlog_loop(n, mode))
            theirs, their_bytes = _langgraph_loop(n, mode)
            extra: dict[str, Any] = {
                "langgraph_ms_per_step": round(theirs * 1e3, 3),
                "speedup": round(theirs / ours, 1),
                "agentlog_MB": round(our_bytes / 1e6, 2),
                "langgraph_MB": round(their_bytes / 1e6, 1),
                "bytes_ratio": round(their_bytes / max(our_bytes, 1), 0),
            }
            name = f"loop N={n} {mode}: agentlog vs LangGraph"
            if mode == "sync":
                dbos, dbos_bytes = _dbos_loop(n)
                name += " vs DBOS"
                extra |= {
                    "dbos_ms_per_step": round(dbos * 1e3, 3),
                    "dbos_speedup": round(dbos / ours, 2),
                    "dbos_MB": round(dbos_bytes / 1e6, 2),
                    "dbos_bytes_ratio": round(dbos_bytes / max(our_bytes, 1), 2),
                }
            rows.append(Row(AREA, name, "ms/step", ours * 1e3, None, extra))
    return rows
