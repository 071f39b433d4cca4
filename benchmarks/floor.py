"""The physical floor of a durable write, measured in the same run as what sits on it.

A durable step or append can cost no less than the disk's flush. Two floors,
each timed on a fresh file beside the benchmark's own files:

* **SQLite WAL commit**: one ``INSERT`` of a small row (16 bytes) committed
  in WAL mode with ``synchronous=FULL``, set explicitly, as agentlog's
  SQLite log commits a durable append: one fsync of the WAL per commit;
* **os.fsync**: ``os.fsync`` after a ``write`` of 16 bytes appended to an
  open file: the flush alone, with no database around it.

A row that sits on the floor prints its ratio to both (:func:`floor_ratios`),
so that a figure says how far above the disk it is, whatever the disk did in
this run (a shared disk's fsync varies by 2x between runs).
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.durability import pin_sqlite
from benchmarks.harness import row_from_samples

__all__ = ["FLOOR_BYTES", "Floors", "floor_ratios", "fsync_samples", "sqlite_commit_samples"]

#: Bytes each floor write carries: small, so that the flush is all it measures.
FLOOR_BYTES = 16


def sqlite_commit_samples(folder: Path, repeat: int, *, warmup: int = 5) -> list[float]:
    """Seconds of each of ``repeat`` single-INSERT commits, WAL and synchronous=FULL."""
    conn = sqlite3.connect(folder / "floor.db", isolation_level=None)
    try:
        pin_sqlite(conn, "wal")
        conn.execute("CREATE TABLE floor (k INTEGER PRIMARY KEY, v BLOB)")
        row = os.urandom(FLOOR_BYTES)
        samples: list[float] = []
        for i in range(warmup + repeat):
            start = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO floor (v) VALUES (?)", (row,))
            conn.execute("COMMIT")
            if i >= warmup:
                samples.append(time.perf_counter() - start)
        return samples
    finally:
        conn.close()


def fsync_samples(folder: Path, repeat: int, *, warmup: int = 5) -> list[float]:
    """Seconds of each of ``repeat`` small appends to one file, each followed by ``os.fsync``."""
    chunk = os.urandom(FLOOR_BYTES)
    fd = os.open(folder / "floor.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        samples: list[float] = []
        for i in range(warmup + repeat):
            start = time.perf_counter()
            os.write(fd, chunk)
            os.fsync(fd)
            if i >= warmup:
                samples.append(time.perf_counter() - start)
        return samples
    finally:
        os.close(fd)


class Floors:
    """Both floors measured once in this run, their rows, and ratios against them."""

    def __init__(self, area: str, folder: Path, repeat: int) -> None:
        self.sqlite = sqlite_commit_samples(folder, repeat)
        self.fsync = fsync_samples(folder, repeat)
        self.rows = [
            row_from_samples(
                area,
                "floor: SQLite WAL commit of one small INSERT (synchronous=FULL)",
                self.sqlite,
                unit="us",
                row_bytes=FLOOR_BYTES,
            ),
            row_from_samples(
                area,
                f"floor: os.fsync after a {FLOOR_BYTES}-byte append to a file",
                self.fsync,
                unit="us",
            ),
        ]

    def ratios(self, samples_s: list[float]) -> dict[str, Any]:
        """``samples_s``'s median over each floor's median (:func:`floor_ratios`)."""
        return floor_ratios(statistics.median(samples_s), self.sqlite, self.fsync)


def floor_ratios(median_s: float, sqlite_s: list[float], fsync_s: list[float]) -> dict[str, float]:
    """``x_sqlite_floor`` and ``x_fsync_floor``: a median over each floor's median."""
    return {
        "x_sqlite_floor": round(median_s / statistics.median(sqlite_s), 2),
        "x_fsync_floor": round(median_s / statistics.median(fsync_s), 2),
    }
