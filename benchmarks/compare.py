"""Two benchmark runs side by side: ``python -m benchmarks.compare BEFORE.json AFTER.json``.

Each file is what ``python -m benchmarks`` writes (``benchmarks/results/latest.json``):
either a plain list of rows (older runs) or an object with ``rows`` and the load
average of the run and of each area (``areas``). Rows are matched by area and
name (the k-th row of a name with the k-th, should a name repeat). The table
shows each side's median and p99, after/before (the medians' ratio, only when
both sides use the same unit), and beside each side the floor and peer ratios
its row carries from the same run (``x_sqlite_floor``, ``ratio_vs_raw``,
``ms_vs_SqliteSaver``, ...). A row on one side only is listed as such. Under it,
each area's load average on each side. ``--markdown`` prints the tables as
Markdown, for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.harness import Row, fmt, p99_cell

__all__ = [
    "COMPARE_COLUMNS",
    "AreaRun",
    "Pair",
    "RunResults",
    "compare_cells",
    "load_results",
    "match_rows",
    "peer_ratios",
    "ratio",
]

#: The comparison table's columns, in order: :func:`compare_cells` gives one pair's cells.
COMPARE_COLUMNS = (
    "area",
    "benchmark",
    "unit",
    "before median",
    "before p99",
    "after median",
    "after p99",
    "after/before",
    "before: floor / peer",
    "after: floor / peer",
)

#: An extra whose name matches this, and whose value is a number, is a ratio to a
#: floor or a peer measured in the same run.
_PEER_KEY = re.compile(r"^x_|vs_|ratio|floor")


@dataclass
class AreaRun:
    """One area's run: the load average (1, 5, 15 min) when it started and ended."""

    load_before: tuple[float, float, float] | None = None
    load_after: tuple[float, float, float] | None = None
    seconds: float | None = None
    error: str | None = None
    """Why the area gave no rows (it failed on that side), or None."""


@dataclass
class RunResults:
    """One results file: its rows, the whole run's load and each area's."""

    rows: list[Row]
    areas: dict[str, AreaRun] = field(default_factory=dict)
    load_before: tuple[float, float, float] | None = None
    load_after: tuple[float, float, float] | None = None
    label: str = ""


@dataclass
class Pair:
    """One benchmark on both sides; ``before`` or ``after`` is None if only one has it."""

    area: str
    name: str
    before: Row | None
    after: Row | None


def _load(value: Any) -> tuple[float, float, float] | None:
    """A load average from a list of three numbers or ``/proc/loadavg``'s text."""
    if value is None:
        return None
    parts = value.split()[:3] if isinstance(value, str) else list(value)[:3]
    a, b, c = (float(x) for x in parts)
    return (a, b, c)


def _row(data: dict[str, Any]) -> Row:
    return Row(
        area=data["area"],
        name=data["name"],
        unit=data["unit"],
        median=float(data["median"]),
        p99=None if data.get("p99") is None else float(data["p99"]),
        extra=dict(data.get("extra") or {}),
        n=data.get("n"),
    )


def load_results(path: Path) -> RunResults:
    """Read a results file of either shape (a list of rows, or an object with ``rows``)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a benchmark results file ({exc})") from exc
    if isinstance(data, list):
        return RunResults([_row(r) for r in data], label=path.name)
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise ValueError(f"{path}: expected a list of rows or an object with 'rows'")
    areas = {
        name: AreaRun(
            _load(a.get("load_before")),
            _load(a.get("load_after")),
            a.get("seconds"),
            a.get("error"),
        )
        for name, a in (data.get("areas") or {}).items()
    }
    return RunResults(
        [_row(r) for r in data["rows"]],
        areas,
        _load(data.get("load_before")),
        _load(data.get("load_after")),
        data.get("label") or path.name,
    )


def _keyed(rows: list[Row]) -> dict[tuple[str, str, int], Row]:
    """Each row under (area, name, k): k counts earlier rows of the same area and name."""
    seen: dict[tuple[str, str], int] = {}
    out: dict[tuple[str, str, int], Row] = {}
    for row in rows:
        k = seen.get((row.area, row.name), 0)
        seen[(row.area, row.name)] = k + 1
        out[(row.area, row.name, k)] = row
    return out


def match_rows(before: list[Row], after: list[Row]) -> list[Pair]:
    """Pair rows by area and name: areas in the order first seen (before, then after);
    within an area, before's order, then the rows only after has, in its order."""
    old, new = _keyed(before), _keyed(after)
    areas = list(dict.fromkeys([r.area for r in before] + [r.area for r in after]))
    pairs: list[Pair] = []
    for area in areas:
        keys = [k for k in old if k[0] == area] + [k for k in new if k[0] == area and k not in old]
        pairs.extend(Pair(area, k[1], old.get(k), new.get(k)) for k in keys)
    return pairs


def ratio(pair: Pair) -> float | None:
    """After's median over before's; None if a side is missing, the units differ, or
    before's median is 0."""
    if pair.before is None or pair.after is None or pair.before.unit != pair.after.unit:
        return None
    if pair.before.median == 0:
        return None
    return pair.after.median / pair.before.median


def peer_ratios(row: Row | None) -> str:
    """The row's ratios to a floor or a peer of the same run, as ``key=value, ...``."""
    if row is None:
        return ""
    return ", ".join(
        f"{k}={fmt(float(v))}"
        for k, v in row.extra.items()
        if _PEER_KEY.search(k) and isinstance(v, int | float) and not isinstance(v, bool)
    )


def compare_cells(pair: Pair) -> tuple[str, ...]:
    """One pair's cells, in the order of :data:`COMPARE_COLUMNS`."""
    b, a = pair.before, pair.after
    units = list(dict.fromkeys(row.unit for row in (b, a) if row is not None))
    unit = " -> ".join(units)
    r = ratio(pair)
    if b is None:
        what = "only after"
    elif a is None:
        what = "only before"
    else:
        what = "" if r is None else f"{r:.2f}x"
    return (
        pair.area,
        pair.name,
        unit,
        "" if b is None else fmt(b.median),
        "" if b is None else p99_cell(b),
        "" if a is None else fmt(a.median),
        "" if a is None else p99_cell(a),
        what,
        peer_ratios(b),
        peer_ratios(a),
    )


def _load_text(load: tuple[float, float, float] | None) -> str:
    return "-" if load is None else " / ".join(f"{x:.2f}" for x in load)


def _area_cell(run: AreaRun | None) -> str:
    if run is None:
        return "-"
    text = f"{_load_text(run.load_before)} -> {_load_text(run.load_after)}"
    if run.seconds is not None:
        text += f" ({run.seconds:.0f}s)"
    if run.error:
        text += f"; failed: {run.error}"
    return text


def load_cells(before: RunResults, after: RunResults) -> list[tuple[str, str, str]]:
    """Per area (and the whole run): the load at start -> end on each side."""
    names = list(dict.fromkeys([*before.areas, *after.areas]))
    cells = [(n, _area_cell(before.areas.get(n)), _area_cell(after.areas.get(n))) for n in names]
    if before.load_before or after.load_before:
        whole_b = AreaRun(before.load_before, before.load_after)
        whole_a = AreaRun(after.load_before, after.load_after)
        cells.append(("(whole run)", _area_cell(whole_b), _area_cell(whole_a)))
    return cells


def _markdown(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(header), "|" + "---|" * len(header), *(line(r) for r in rows)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare")
    parser.add_argument("before", type=Path, help="the earlier run's results JSON")
    parser.add_argument("after", type=Path, help="the later run's results JSON")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = parser.parse_args(argv)
    try:
        before, after = load_results(args.before), load_results(args.after)
    except ValueError as exc:
        parser.error(str(exc))
    pairs = [compare_cells(p) for p in match_rows(before.rows, after.rows)]
    loads = load_cells(before, after)
    load_header = ("area", f"load before: {before.label}", f"load after: {after.label}")
    if args.markdown:
        print(_markdown(COMPARE_COLUMNS, pairs))
        print()
        print(_markdown(load_header, loads))
        return 0
    console = Console(width=max(Console().width, 200))
    table = Table(title=f"{before.label} -> {after.label}")
    for column in COMPARE_COLUMNS:
        numeric = "median" in column or "p99" in column
        table.add_column(column, justify="right" if numeric else "left")
    for cells in pairs:
        table.add_row(*cells)
    console.print(table)
    load_table = Table(title="load average (1 / 5 / 15 min) at start -> end of each area")
    for column in load_header:
        load_table.add_column(column)
    for cells3 in loads:
        load_table.add_row(*cells3)
    console.print(load_table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
