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

#: Starts and stops a real broker from the Maven jars (see its docstring).
KAFKA_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "kafka_broker.py"

__all__ = ["Row", "percentile", "row_from_samples", "time_calls"]


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


def percentile(samples: list[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank."""
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def row_from_samples(
    area: str, name: str, samples_s: list[float], *, unit: str = "ms", **extra: Any
) -> Row:
    """A Row from samples in seconds, shown in ``unit`` (ms or us)."""
    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit]
    return Row(
        area,
        name,
        unit,
        statistics.median(samples_s) * scale,
        percentile(samples_s, 99) * scale,
        extra,
    )


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
