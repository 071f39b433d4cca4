"""The small harness every benchmark module uses.

A benchmark module is ``benchmarks/bench_<area>.py`` with one function::

    def collect(quick: bool) -> list[Row]

``python -m benchmarks`` imports each module, calls ``collect``, prints one
table of every row and writes the rows as JSON to
``benchmarks/results/latest.json``. ``quick`` shrinks sizes for a smoke run.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentlog.eventlog import Event, TaskCompleted
from benchmarks import payloads

#: Starts and stops a real broker from the Maven jars (see its docstring).
KAFKA_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "kafka_broker.py"

__all__ = [
    "COLUMNS",
    "Row",
    "fmt",
    "p99_cell",
    "percentile",
    "row_from_samples",
    "table_cells",
    "task_events",
    "time_calls",
]

#: The table's columns, in order: :func:`table_cells` gives one row's cells.
COLUMNS = ("area", "benchmark", "median", "p99", "n", "unit", "details")


@dataclass
class Row:
    """One line of the results table.

    ``median`` and ``p99`` are in ``unit``; ``extra`` holds anything else worth
    printing (throughput, bytes, peak RSS, a ratio against a peer and its target).
    """

    area: str
    name: str
    unit: str
    median: float
    p99: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    n: int | None = None
    """How many samples ``median`` and ``p99`` come from. 1 means a single
    measurement (a whole run timed once, a byte count): it has no tail, and the
    table says ``n=1`` where a p99 would be, rather than print the one value
    twice as if it were a percentile. None: a row of another module that does
    not say (the table then shows its p99 if it has one)."""


def fmt(value: object) -> str:
    """A table cell: floats with thousands separators, 3 decimals below 100."""
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def p99_cell(row: Row) -> str:
    """The p99 column: ``n=1`` for a single sample, so one figure never poses as a tail."""
    if row.n == 1:
        return "n=1"
    return "" if row.p99 is None else fmt(row.p99)


def table_cells(row: Row) -> tuple[str, ...]:
    """One row's cells, in the order of :data:`COLUMNS`."""
    details = ", ".join(f"{k}={fmt(v)}" for k, v in row.extra.items())
    n = "" if row.n is None else f"{row.n:,}"
    return (row.area, row.name, fmt(row.median), p99_cell(row), n, row.unit, details)


def percentile(samples: list[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank."""
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def row_from_samples(
    area: str, name: str, samples_s: list[float], *, unit: str = "ms", **extra: Any
) -> Row:
    """A Row from samples in seconds, shown in ``unit`` (s, ms or us).

    One sample gives a row with no p99 (``n=1`` in the table): a percentile of
    one value would be that value again, dressed up as a tail.
    """
    if not samples_s:
        raise ValueError(f"{area}/{name}: no samples to make a row of; measure at least once")
    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit]
    tail = percentile(samples_s, 99) * scale if len(samples_s) > 1 else None
    return Row(area, name, unit, statistics.median(samples_s) * scale, tail, extra, len(samples_s))


def task_events(label: str, run_id: str, first: int, count: int, epoch: int = 0) -> list[Event]:
    """Events ``first .. first + count - 1`` of a run, each a task's realistic result.

    Every backend's benchmark stores these, so that their rows compare: each
    is a TaskCompleted whose result is a tool result of
    :data:`~benchmarks.payloads.PAYLOAD_BYTES` (search hits, a fetched page, a
    summary, a chat completion, an embedding, in turn), every one different.
    The same arguments give the same events.
    """
    r = payloads.rng(label, run_id, first)
    names = payloads.TOOL_NAMES
    return [
        Event(
            run_id,
            seq,
            TaskCompleted(
                f"k{seq}", payloads.tool_result(r, names[seq % len(names)], payloads.PAYLOAD_BYTES)
            ),
            writer_epoch=epoch,
        )
        for seq in range(first, first + count)
    ]


def time_calls(fn: Callable[[], Any], repeat: int, *, warmup: int = 3) -> list[float]:
    """Call ``fn`` ``repeat`` times after ``warmup`` calls; return seconds each."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


@contextlib.contextmanager
def kafka_broker(prefix: str) -> Iterator[tuple[str, Path | None]]:
    """``(bootstrap, data folder)``: the broker named by KAFKA_BOOTSTRAP_SERVERS
    (data folder None), or one started here from the Maven jars and stopped after."""
    given = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if given:
        yield given, None
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as state:
        started = subprocess.run(
            [sys.executable, str(KAFKA_SCRIPT), "start", "--dir", state],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        try:
            if started.returncode != 0:
                raise RuntimeError(f"cannot start the Kafka broker: {started.stderr}")
            yield started.stdout.strip(), Path(state) / "data"
        finally:
            subprocess.run(
                [sys.executable, str(KAFKA_SCRIPT), "stop", "--dir", state],
                capture_output=True,
                check=False,
                timeout=120,
            )
