"""Group commit: 100 concurrent runs in sync durability on SQLite share fsyncs.

1. Throughput of the real Runtime (``Runtime.open("sqlite:///...")``): 100
   runs started at once, each a loop of three steps (plan, act, observe) that
   writes a ~500-byte message per step, ``durability="sync"``: every step's
   events are committed with synchronous=FULL before the run's next step
   starts. The figure is steps per wall second, from the first start to the
   last run's end.
2. The same runs with ``durability="exit"`` (nothing written until a run
   ends): the ceiling that the runtime's own work per step sets on this
   machine, whatever the log does.
3. The raw floor it is compared with, on the same disk in the same process:
   one sqlite3 INSERT + COMMIT per step (WAL, synchronous=FULL), one after
   the other, as a log without group commit must do for each durable step.

Beside 1 and 2, ``cpu_us_per_step``: the CPU of this process (the event
loop's thread and the log's worker thread) per step. The GIL lets one of
them run Python at a time, so 1e6 over it is the steps per second no
amount of grouping can pass (issue 23 item 7).

Beside them, the disk's floor measured in the same run
(``benchmarks/floor.py``: one fsync'd SQLite WAL commit of a small INSERT,
and ``os.fsync`` after a small append), and ``cpu_ceiling_steps_s``: 1e6
over the CPU per step.

Rounds alternate between the two so that disk noise hits both alike. Files
go under ``.cache/bench`` in the repo, on the same disk as the code.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime, StepContext, Workflow, end, goto
from agentlog.runtime._workflow import Next
from benchmarks import payloads
from benchmarks.floor import Floors
from benchmarks.harness import Row

AREA = "group_commit"
RUNS = 100
MESSAGE_BYTES = payloads.PAYLOAD_BYTES
ROOT = Path(__file__).resolve().parent.parent / ".cache" / "bench"


def _workdir() -> Path:
    ROOT.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="group-commit-", dir=ROOT))


def _messages(count: int) -> list[dict[str, Any]]:
    r = payloads.rng("group-commit")
    return [payloads.conversation_message(r, i, MESSAGE_BYTES) for i in range(count)]


def agent_loop(steps: int) -> Workflow:
    """Plan, act, observe, plan, ... for ``steps`` steps; each step writes one message."""
    wf = Workflow(
        "bench-agent-loop", state={"last": "replace", "n": "replace"}, max_steps=steps + 10
    )
    messages = _messages(steps)
    order = ("plan", "act", "observe")

    def after(ctx: StepContext, name: str) -> Next:
        n = ctx.state.get("n", 0) + 1
        if n >= steps:
            return end(last=messages[n - 1], n=n)
        return goto(order[(order.index(name) + 1) % 3], last=messages[n - 1], n=n)

    @wf.step
    async def plan(ctx: StepContext) -> Next:
        return after(ctx, "plan")

    @wf.step
    async def act(ctx: StepContext) -> Next:
        return after(ctx, "act")

    @wf.step
    async def observe(ctx: StepContext) -> Next:
        return after(ctx, "observe")

    return wf


async def _runtime_round(
    folder: Path, steps: int, mode: str = "sync"
) -> tuple[float, float, float]:
    """Steps per second for RUNS concurrent runs; appends per commit; and the
    CPU seconds per step of this process (both threads), in microseconds."""
    wf = agent_loop(steps)
    async with await Runtime.open(f"sqlite:///{folder / 'agentlog.db'}", workflows=[wf]) as rt:
        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(
            *(rt.start(wf, run_id=f"run-{i}", durability=mode) for i in range(RUNS))
        )
        states = await asyncio.gather(*(rt.wait(f"run-{i}") for i in range(RUNS)))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        log = rt.log
        assert isinstance(log, SqliteEventLog)
        group = getattr(log, "_group", None)  # None: a log without group commit
        per_commit = 1.0 if group is None else group.appends / max(group.commits, 1)
    for state in states:
        assert state.status == "completed" and state.steps == steps, (state.status, state.steps)
    # What was committed is what the runs saw: every step is in the file.
    async with SqliteEventLog(folder / "agentlog.db", read_only=True) as reopened:
        runs = await reopened.list_runs(status="completed")
        assert len(runs) == RUNS and all(run.steps == steps for run in runs)
    return RUNS * steps / elapsed, per_commit, cpu / (RUNS * steps) * 1e6


def _raw_round(folder: Path, commits: int) -> float:
    """Sequential INSERT + COMMIT with synchronous=FULL: commits per second."""
    rows = [json.dumps(m, separators=(",", ":")).encode() for m in _messages(commits)]
    conn = sqlite3.connect(folder / "raw.db", isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
        started = time.perf_counter()
        for row in rows:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t (v) VALUES (?)", (row,))
            conn.execute("COMMIT")
        return commits / (time.perf_counter() - started)
    finally:
        conn.close()


def collect(quick: bool) -> list[Row]:
    """Run the group commit benchmark (see the module docstring)."""
    steps, commits, rounds = (20, 500, 2) if quick else (100, 3000, 3)
    ours: list[float] = []
    raw: list[float] = []
    ceiling: list[float] = []
    per_commit: list[float] = []
    cpu_sync: list[float] = []
    cpu_exit: list[float] = []
    floors: Floors | None = None
    for _ in range(rounds):
        folder = _workdir()
        try:
            if floors is None:
                floors = Floors(AREA, folder, 100 if quick else 300)
            raw.append(_raw_round(folder, commits))
            rate, grouped, cpu = asyncio.run(_runtime_round(folder / "sync", steps))
            ours.append(rate)
            per_commit.append(grouped)
            cpu_sync.append(cpu)
            rate, _grouped, cpu = asyncio.run(_runtime_round(folder / "exit", steps, "exit"))
            ceiling.append(rate)
            cpu_exit.append(cpu)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    ours_median, raw_median = statistics.median(ours), statistics.median(raw)
    assert floors is not None
    return [
        *floors.rows,
        Row(
            AREA,
            f"{RUNS} runs x {steps} steps, sync, SQLite, Runtime",
            "steps/s",
            ours_median,
            None,
            {
                "rounds": ", ".join(f"{r:,.0f}" for r in ours),
                "appends_per_commit": round(statistics.median(per_commit), 1),
                "cpu_us_per_step": round(statistics.median(cpu_sync)),
                "cpu_ceiling_steps_s": round(1e6 / statistics.median(cpu_sync)),
                "vs_raw_commit": round(ours_median / raw_median, 2),
                "target": ">=10000 steps/s",
            },
        ),
        Row(
            AREA,
            f"{RUNS} runs x {steps} steps, exit (no write per step): the ceiling",
            "steps/s",
            statistics.median(ceiling),
            None,
            {
                "rounds": ", ".join(f"{r:,.0f}" for r in ceiling),
                "cpu_us_per_step": round(statistics.median(cpu_exit)),
                "cpu_ceiling_steps_s": round(1e6 / statistics.median(cpu_exit)),
            },
        ),
        Row(
            AREA,
            "raw sqlite3 INSERT+COMMIT (FULL), one per step",
            "commits/s",
            raw_median,
            None,
            {"rounds": ", ".join(f"{r:,.0f}" for r in raw), "commits": commits},
        ),
    ]
