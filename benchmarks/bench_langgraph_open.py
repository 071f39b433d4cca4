"""Opening a thread to read it, in wall and CPU time: AgentlogSaver vs SqliteSaver.

Issue 23 item 8 ("get_tuple and open no slower than SqliteSaver's"). Each
saver builds the same bounded-state thread (as :mod:`benchmarks.bench_langgraph_reads`),
then, round after round and alternately (so both see the same load), a fresh
saver is opened and asked for the thread's latest checkpoint: ``open`` is the
opener alone (``from_url``; ``sqlite3.connect`` and its pragmas plus
``SqliteSaver(conn)``), ``cold get_tuple`` is the first call, ``open a
thread`` both, and ``close`` the closing. Each is timed in wall time and in
this process's CPU time (``time.process_time``), which a loaded machine
inflates less. Each row of AgentlogSaver gives its ratio to SqliteSaver's
(``vs_SqliteSaver``, ours over theirs, of the medians).

Usage: ``python -m benchmarks --only langgraph_open [--quick]`` (100 rounds
with ``--quick``, else 500, on a 500-checkpoint thread).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from benchmarks.bench_langgraph import _stream, _window_builder
from benchmarks.harness import Row, row_from_samples
from benchmarks.langgraph_savers import PEER, Backend, agentlog_sqlite, sqlite_saver

__all__ = ["collect"]

AREA = "langgraph"
_PHASES = ("open", "cold get_tuple", "open a thread", "close")


def _once(backend: Backend, config: Any, checkpoints: int) -> list[float]:
    """One round: the wall and CPU seconds of each phase, in :data:`_PHASES` order."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    with backend.opener() as saver:
        wall1, cpu1 = time.perf_counter(), time.process_time()
        found = saver.get_tuple(config)
        wall2, cpu2 = time.perf_counter(), time.process_time()
    wall3, cpu3 = time.perf_counter(), time.process_time()
    assert found is not None and found.checkpoint["channel_values"]["n"] == checkpoints
    return [
        wall1 - wall0,
        cpu1 - cpu0,
        wall2 - wall1,
        cpu2 - cpu1,
        wall2 - wall0,
        cpu2 - cpu0,
        wall3 - wall2,
        cpu3 - cpu2,
    ]


def collect(quick: bool) -> list[Row]:
    """Open, cold get_tuple, both, and close, for each saver, wall and CPU."""
    checkpoints, rounds = 500, 100 if quick else 500
    config: Any = {"configurable": {"thread_id": "bench"}}
    backends = [sqlite_saver(), agentlog_sqlite()]
    samples: dict[str, list[list[float]]] = {b.name: [] for b in backends}
    try:
        for backend in backends:
            with backend.opener() as saver:
                _stream(_window_builder(checkpoints), saver, {"n": 0}, checkpoints, "sync")
            _once(backend, config, checkpoints)  # the first open after the build: not counted
        for _ in range(rounds):
            for backend in backends:
                samples[backend.name].append(_once(backend, config, checkpoints))
    finally:
        for backend in backends:
            backend.cleanup()
    thread = f"bounded state, {checkpoints:,}-checkpoint thread"
    rows: list[Row] = []
    for name, rounds_of in samples.items():
        for i, phase in enumerate(_PHASES):
            for j, clock in enumerate(("wall", "cpu")):
                column = [r[2 * i + j] for r in rounds_of]
                extra: dict[str, Any] = {}
                if name != PEER:
                    peer = statistics.median(r[2 * i + j] for r in samples[PEER])
                    extra[f"vs_{PEER}"] = round(statistics.median(column) / max(peer, 1e-12), 2)
                rows.append(
                    row_from_samples(AREA, f"{thread}, {phase} ({clock}): {name}", column, **extra)
                )
    return rows
