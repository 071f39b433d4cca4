"""Run every ``benchmarks/bench_*.py`` and print one table.

Usage: ``python -m benchmarks [--quick] [--only AREA ...]``. Results are also
written to ``benchmarks/results/latest.json``: ``rows`` (every row), the load
average before and after the whole run, and ``areas`` (each area's load at its
start and end, and its seconds). ``python -m benchmarks.compare`` puts two such
files side by side.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import logging
import os
import pkgutil
import sys
import time
from pathlib import Path

import structlog
from rich.console import Console
from rich.table import Table

from benchmarks.harness import COLUMNS, Row, table_cells


def _load(load: tuple[float, float, float] | None = None) -> str:
    """The load average as ``a / b / c``: the machine's now, or ``load``."""
    return " / ".join(f"{x:.2f}" for x in (load or os.getloadavg()))


def main(argv: list[str] | None = None) -> int:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--only", nargs="*", default=None, help="areas to run, e.g. eventlog")
    args = parser.parse_args(argv)
    console = Console(width=max(Console().width, 200))
    # The machine may be shared: the load beside the table says how much.
    load_before = os.getloadavg()
    rows: list[Row] = []
    areas: dict[str, dict[str, object]] = {}
    here = Path(__file__).parent
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name):
        if not info.name.startswith("bench_"):
            continue
        area = info.name.removeprefix("bench_")
        if args.only is not None and area not in args.only:
            continue
        console.print(f"[bold]running {info.name}[/bold]")
        started, area_load = time.perf_counter(), os.getloadavg()
        module = importlib.import_module(f"benchmarks.{info.name}")
        rows.extend(module.collect(args.quick))
        seconds = time.perf_counter() - started
        areas[area] = {"load_before": area_load, "load_after": os.getloadavg(), "seconds": seconds}
        console.print(f"  done in {seconds:.1f}s (load {_load(area_load)} -> {_load()})")
    table = Table(title="agentlog benchmarks")
    for column in COLUMNS:
        table.add_column(column, justify="right" if column in ("median", "p99", "n") else "left")
    for row in rows:
        table.add_row(*table_cells(row))
    console.print(table)
    console.print(f"load average (1, 5, 15 min): before {_load(load_before)}, after {_load()}")
    out = here / "results" / "latest.json"
    out.parent.mkdir(exist_ok=True)
    results = {
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "areas": areas,
        "rows": [dataclasses.asdict(r) for r in rows],
    }
    out.write_text(json.dumps(results, indent=2, default=str))
    console.print(f"results written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
