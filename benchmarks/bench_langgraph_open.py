"""Opening a thread to read it, in wall and CPU time: AgentlogSaver vs SqliteSaver.

Issue 23 item 8 ("get_tuple and open no slower than SqliteSaver's"). Each
saver builds the same bounded-state thread (as :mod:`benchmarks.bench_langgraph_reads`),
then, round after round and alternately (so both see the same load; each
goes first in every other round), a fresh
saver is opened and asked for the thread's latest checkpoint: ``open`` is the
opener alone (``from_url``; ``sqlite3.connect`` and its pragmas plus
``SqliteSaver(conn)``), ``cold get_tuple`` is the first call, ``open a
thread`` both, and ``close`` the closing. Each is timed in wall time and in
this process's CPU time (``time.process_time``), which a loaded machine
inflates less. Each row of AgentlogSaver gives its ratio to SqliteSaver's
(``vs_SqliteSaver``, ours over theirs, of the medians).

**SQLite's floor**, in the same rounds, on each saver's own file, in CPU
time, with no saver and no Python of ours around it: a fresh ``sqlite3``
connection

* ``floor: connect + first read``: and one trivial read that names a table
  (``SELECT 1 FROM sqlite_master LIMIT 1``), so SQLite opens the WAL's index
  and parses the schema (agentlog's file holds the log, its run index,
  mailboxes and queues: 20 schema objects; SqliteSaver's 4). The same SQL on
  both files: the difference is what one-file storage forces on a first read;
* ``floor: ... + get_tuple's SQL``: and then the statements each saver's
  cold ``get_tuple`` runs, as a fresh saver ran them (captured with a trace
  callback on every connection it opened, values inlined), compiled on that
  fresh connection, run and fetched: ours, the one cold-read statement
  (``eventlog/sqlite/_cold_read.py``); SqliteSaver's, its ``setup()`` (the
  ``CREATE TABLE IF NOT EXISTS`` script, and the ``ALTER TABLE`` it tries,
  which fails to compile and so is never traced) and its two ``SELECT`` statements.

And two figures from those, round by round (each round's samples, then
the median): ``open a thread, less the schema's extra parse``: ours less
(our floor-1 minus theirs), set against SqliteSaver's whole open a thread,
which says how far ours is once the part that one-file storage forces is
taken off; ``open a thread, less its SQL floor``: each saver's open a thread
less its own floor-2, its Python and the connection's own opening with its
pragmas (what is left to cut).

Usage: ``python -m benchmarks --only langgraph_open [--quick]`` (100 rounds
with ``--quick``, else 500, on a 500-checkpoint thread).
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.bench_langgraph import _stream, _window_builder
from benchmarks.harness import Row, row_from_samples
from benchmarks.langgraph_savers import PEER, Backend, agentlog_sqlite, sqlite_saver

__all__ = ["collect"]

AREA = "langgraph"
_PHASES = ("open", "cold get_tuple", "open a thread", "close")
_FLOORS = ("floor: connect + first read", "floor: connect + first read + get_tuple's SQL")
#: A read that names a table, so that SQLite opens the WAL and parses the schema.
_FIRST_READ = "SELECT 1 FROM sqlite_master LIMIT 1"
#: SqliteSaver.setup()'s migration. On a file that has the column it fails
#: to compile ("duplicate column name"), so a trace callback never sees it.
_ALTER = "ALTER TABLE writes ADD COLUMN task_path TEXT NOT NULL DEFAULT ''"

#: A saver's cold get_tuple as SQL alone, on a connection.
Statements = Callable[[sqlite3.Connection], None]


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


def _floors(file: Path, statements: Statements) -> list[float]:
    """CPU seconds of each floor, in :data:`_FLOORS` order, each on a fresh
    connection that is the file's only one (as a fresh saver's is)."""
    cpus: list[float] = []
    for then in (None, statements):
        cpu0 = time.process_time()
        conn = sqlite3.connect(file)
        try:
            conn.execute(_FIRST_READ).fetchall()
            if then is not None:
                then(conn)
            cpus.append(time.process_time() - cpu0)
        finally:
            conn.close()
    return cpus


def _sql_of(backend: Backend, config: Any) -> Statements:
    """The SQL a fresh saver's cold get_tuple runs, as it ran it (every new
    connection traced while one saver opens and reads; the open's own
    statements left out), to run again on a connection with nothing else."""
    seen: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(seen.append)
        return conn

    sqlite3.connect = traced  # type: ignore[assignment]
    try:
        with backend.opener() as saver:
            opened = len(seen)
            found = saver.get_tuple(config)
            statements = seen[opened:]
    finally:
        sqlite3.connect = connect
    assert found is not None and statements, statements
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    script = [s for s in statements if s not in reads]
    if backend.name == PEER:
        script.append(_ALTER)

    def run(conn: sqlite3.Connection) -> None:
        for statement in script:
            try:
                conn.execute(statement).fetchall()
            except sqlite3.OperationalError as exc:
                assert statement is _ALTER and "duplicate column" in str(exc), exc
        for statement in reads:
            conn.execute(statement).fetchall()

    return run


def _rows_of(name: str, label: str, column: list[float], peer: list[float] | None = None) -> Row:
    extra: dict[str, Any] = {}
    if peer is not None:
        ratio = statistics.median(column) / max(statistics.median(peer), 1e-12)
        extra[f"vs_{PEER}"] = round(ratio, 2)
    return row_from_samples(AREA, f"{label}: {name}", column, **extra)


def collect(quick: bool) -> list[Row]:
    """Open, cold get_tuple, both, and close, for each saver, wall and CPU;
    SQLite's floors on each file and what is left above them, CPU."""
    checkpoints, rounds = 500, 100 if quick else 500
    config: Any = {"configurable": {"thread_id": "bench"}}
    backends = [sqlite_saver(), agentlog_sqlite()]
    samples: dict[str, list[list[float]]] = {b.name: [] for b in backends}
    floors: dict[str, list[list[float]]] = {b.name: [] for b in backends}
    try:
        for backend in backends:
            with backend.opener() as saver:
                _stream(_window_builder(checkpoints), saver, {"n": 0}, checkpoints, "sync")
            _once(backend, config, checkpoints)  # the first open after the build: not counted
        sql = {backend.name: _sql_of(backend, config) for backend in backends}
        for backend in backends:
            if backend.file is not None:
                _floors(backend.file, sql[backend.name])  # not counted either
        for i in range(rounds):
            # Each takes its turn first: whatever runs first after the other
            # kind of work pays more (about 0.05 ms of a floor's CPU, seen).
            order = backends if i % 2 == 0 else backends[::-1]
            for backend in order:
                samples[backend.name].append(_once(backend, config, checkpoints))
            for backend in order:
                if backend.file is not None:
                    floors[backend.name].append(_floors(backend.file, sql[backend.name]))
    finally:
        for backend in backends:
            backend.cleanup()
    thread = f"bounded state, {checkpoints:,}-checkpoint thread"
    rows: list[Row] = []
    for name, rounds_of in samples.items():
        for i, phase in enumerate(_PHASES):
            for j, clock in enumerate(("wall", "cpu")):
                column = [r[2 * i + j] for r in rounds_of]
                peer = None if name == PEER else [r[2 * i + j] for r in samples[PEER]]
                rows.append(_rows_of(name, f"{thread}, {phase} ({clock})", column, peer))
    for i, floor in enumerate(_FLOORS):
        for name, rounds_of in floors.items():
            peer = None if name == PEER else [r[i] for r in floors[PEER]]
            rows.append(_rows_of(name, f"{thread}, {floor} (cpu)", [r[i] for r in rounds_of], peer))
    rows.extend(_left(thread, samples, floors))
    return rows


def _left(
    thread: str, samples: dict[str, list[list[float]]], floors: dict[str, list[list[float]]]
) -> list[Row]:
    """Open a thread (CPU) less SQLite's part, round by round (see the module docstring)."""
    both = {name: [r[5] for r in rounds_of] for name, rounds_of in samples.items()}
    ours = next(name for name in samples if name != PEER)
    extra_parse = [o[0] - t[0] for o, t in zip(floors[ours], floors[PEER], strict=True)]
    less_parse = [b - x for b, x in zip(both[ours], extra_parse, strict=True)]
    label = f"{thread}, open a thread less the schema's extra parse (cpu)"
    rows = [_rows_of(ours, label, less_parse, both[PEER])]
    left = {
        name: [b - f[1] for b, f in zip(both[name], floors[name], strict=True)] for name in samples
    }
    for name in (PEER, ours):
        peer = None if name == PEER else left[PEER]
        label = f"{thread}, open a thread less its SQL floor (cpu)"
        rows.append(_rows_of(name, label, left[name], peer))
    return rows
