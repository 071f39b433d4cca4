"""A/B of AgentlogSaver's step against SqliteSaver (issue 23 item 1), two source trees alternately.

Usage (from the repo root)::

    python -m benchmarks.ab_langgraph_put BEFORE_SRC AFTER_SRC [ROUNDS] [SIZES]

Each round runs one child process per variant, in turn: ``before`` (agentlog
under BEFORE_SRC) and ``after`` (under AFTER_SRC), each with this repo's
benchmarks. A child runs ``bench_langgraph``'s message loop for every mode
(``sync``, ``async``) and N in SIZES (default ``50,200,1000``), SqliteSaver
then AgentlogSaver (SQLite) back to back, and reports for each run the CPU
of the whole process per step (``getrusage``: every thread, user and
system) and ``total_ms_per_step``. The table gives each figure's median
over the rounds, and AgentlogSaver's ratio to SqliteSaver taken in the same
child (the median of the per-round ratios). The load average is printed
beside each child.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
_MODES = ("sync", "async")


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def _child(sizes: list[int]) -> None:
    """Every (mode, N) row, SqliteSaver then AgentlogSaver, as JSON lines."""
    from benchmarks.bench_langgraph import run_loop
    from benchmarks.langgraph_savers import agentlog_sqlite, sqlite_saver

    run_loop(agentlog_sqlite(), 10, "sync")  # imports and first-use costs, not measured
    run_loop(sqlite_saver(), 10, "sync")
    for mode in _MODES:
        for n in sizes:
            for name, make in (("SqliteSaver", sqlite_saver), ("AgentlogSaver", agentlog_sqlite)):
                backend = make()
                before = _cpu()
                result = run_loop(backend, n, mode)
                cpu_ms = (_cpu() - before) / n * 1e3
                row = {"mode": mode, "n": n, "saver": name, "cpu_ms": cpu_ms}
                print(json.dumps(row | {"total_ms": result.total_ms_per_step}), flush=True)


def _run(src: str, sizes: list[int]) -> list[dict[str, object]]:
    env = dict(os.environ, PYTHONPATH=f"{Path(src).resolve()}{os.pathsep}{_ROOT}")
    sizes_arg = ",".join(map(str, sizes))
    code = f"from benchmarks.ab_langgraph_put import _child; _child([{sizes_arg}])"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=_ROOT, check=True, capture_output=True, text=True
    ).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main(before: str, after: str, rounds: int, sizes: list[int]) -> None:
    rows: dict[tuple[str, str, int, str], list[dict[str, float]]] = {}
    ratios: dict[tuple[str, str, int], list[dict[str, float]]] = {}
    for number in range(rounds):
        for variant, src in (("before", before), ("after", after)):
            load = Path("/proc/loadavg").read_text().split()[:3]
            got = _run(src, sizes)
            print(f"round {number + 1} {variant}: load {' '.join(load)}", flush=True)
            by = {(str(r["mode"]), int(r["n"]), str(r["saver"])): r for r in got}  # type: ignore[call-overload]
            for (mode, n, saver), r in by.items():
                figures = {"cpu_ms": float(r["cpu_ms"]), "total_ms": float(r["total_ms"])}  # type: ignore[arg-type]
                rows.setdefault((variant, mode, n, saver), []).append(figures)
                if saver == "AgentlogSaver":
                    peer = by[(mode, n, "SqliteSaver")]
                    ratios.setdefault((variant, mode, n), []).append(
                        {k: figures[k] / float(peer[k]) for k in figures}  # type: ignore[arg-type]
                    )
    print("\nvariant mode  N     saver          CPU ms/step  total ms/step  (x SqliteSaver)")
    for (variant, mode, n, saver), samples in sorted(rows.items()):
        cpu = statistics.median(s["cpu_ms"] for s in samples)
        total = statistics.median(s["total_ms"] for s in samples)
        line = f"{variant:7s} {mode:5s} {n:5d} {saver:14s} {cpu:11.3f} {total:14.3f}"
        if saver == "AgentlogSaver":
            r = ratios[(variant, mode, n)]
            line += (
                f"  cpu x{statistics.median(x['cpu_ms'] for x in r):.2f}"
                f"  total x{statistics.median(x['total_ms'] for x in r):.2f}"
            )
        print(line)


if __name__ == "__main__":
    _sizes = [int(s) for s in sys.argv[4].split(",")] if len(sys.argv) > 4 else [50, 200, 1000]
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3, _sizes)
