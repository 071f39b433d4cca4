"""A/B of the batched append on SQLite (issue 23, item 9), two source trees alternately.

Usage (from the repo root)::

    python -m benchmarks.ab_batched_append BEFORE_SRC AFTER_SRC [ROUNDS]

Each round runs one child process per tree, in turn (before, after), each
importing agentlog from its tree. A child appends the benchmarks' shared
task results (:func:`benchmarks.harness.task_events`, ~500 bytes each) in
batches of 1,000 to fresh files, durable and not, three files each, and
takes the floor in the same process: msgpack of each payload's map (one
Packer), the row checksum's two xxh3 digests, and SQLite's raw insert of
the same rows in one transaction a batch, by ``executemany`` (session 32's
floor) and by multi-row INSERTs of 124 rows, each with
``synchronous=NORMAL``, and the latter with FULL (a durable append's:
CPU, and the wall clock, which its fsyncs add to).
It prints one JSON line: events per wall second and per CPU second (the
process, all threads) of each case, medians of its files, the CPU µs an
event of each piece of a durable append timed apart (the log's own
functions, called as the log calls them), the floors' CPU µs an event, and
the load average. The parent prints each child's line and
the medians over the rounds.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import chain
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
_CACHE = _ROOT / ".cache" / "bench"
BATCH = 1_000
TOTAL = 20_000
_TABLE = (
    "CREATE TABLE events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,"
    " ts INTEGER NOT NULL, schema_v INTEGER NOT NULL, writer_epoch INTEGER NOT NULL,"
    " payload BLOB NOT NULL, checksum INTEGER, PRIMARY KEY (run_id, seq)) WITHOUT ROWID"
)
_ONE = "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)"


async def _append(path: Path, events: list[Any], durable: bool) -> tuple[float, float]:
    """Events per wall second and per CPU second of appending ``events`` in batches."""
    from agentlog.eventlog import Event
    from agentlog.eventlog.sqlite import SqliteEventLog

    async with SqliteEventLog(path) as log:
        epoch = await log.claim_writer(events[0].run_id)
        mine = [Event(e.run_id, e.seq, e.data, e.ts, epoch) for e in events]
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(0, len(mine), BATCH):
            await log.append(mine[i : i + BATCH], durable=durable)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return len(mine) / wall, len(mine) / cpu


def _raw_insert(
    path: Path, batches: list[list[tuple[Any, ...]]], sync: str, chunk: int
) -> tuple[float, float]:
    """Raw insert of the rows, a transaction a batch (``chunk`` 0: executemany),
    with ``synchronous=sync``: CPU µs and wall µs an event."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA page_size=8192")  # the log's
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={sync}")
        conn.execute(_TABLE)
        cpu, wall = time.process_time(), time.perf_counter()
        for rows in batches:
            conn.execute("BEGIN IMMEDIATE")
            if chunk:
                flat = list(chain.from_iterable(rows))
                width = chunk * 8
                for i in range(0, len(flat), width):
                    part = flat[i : i + width]
                    conn.execute(_ONE + ",(?,?,?,?,?,?,?,?)" * (len(part) // 8 - 1), part)
            else:
                conn.executemany(_ONE, rows)
            conn.execute("COMMIT")
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        return cpu / TOTAL * 1e6, wall / TOTAL * 1e6
    finally:
        conn.close()


def _best_us(fn: Any, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best / TOTAL * 1e6


async def _pieces(path: Path, events: list[Any]) -> dict[str, float]:
    """CPU µs an event of each piece of a durable append, in the order the log
    runs them, each timed apart (the log's own functions, called as it calls
    them; the transaction on this thread, as a lone append commits)."""
    from agentlog.eventlog import Event
    from agentlog.eventlog._base import check_batch
    from agentlog.eventlog._row_format import event_rows, info_to_row
    from agentlog.eventlog.sqlite import SqliteEventLog
    from agentlog.eventlog.sqlite._group_commit import PendingAppend

    try:  # since session 33's split; a tree before it has them in _group_commit
        from agentlog.eventlog.sqlite._append_batch import _changed, _insert
    except ImportError:
        from agentlog.eventlog.sqlite._group_commit import (  # type: ignore[attr-defined,no-redef]
            _changed,
            _insert,
        )
    from agentlog.eventlog.sqlite._schema import update_written_run_sql

    spent: dict[str, float] = {}

    def timed(name: str, fn: Any, *args: Any) -> Any:
        start = time.process_time()
        result = fn(*args)
        spent[name] = spent.get(name, 0.0) + time.process_time() - start
        return result

    async with SqliteEventLog(path) as log:
        epoch = await log.claim_writer("run")
        mine = [Event(e.run_id, e.seq, e.data, e.ts, epoch) for e in events]
        conn = log._conn
        conn.execute("PRAGMA synchronous=FULL")
        info = await log.find_run("run")
        assert info is not None
        old = info_to_row(info)
        for i in range(0, TOTAL, BATCH):
            batch = mine[i : i + BATCH]
            timed("check_batch", check_batch, batch)
            rows = timed("event_rows", event_rows, batch, epoch, None)
            timed("BEGIN IMMEDIATE + SAVEPOINT", conn.execute, "BEGIN IMMEDIATE")
            timed("BEGIN IMMEDIATE + SAVEPOINT", conn.execute, "SAVEPOINT a")
            after = timed("run row fold (RunInfo.after)", info.after, batch)
            new = timed("run row as stored", info_to_row, after)
            changed = _changed(old, new)
            params = [*(new[j] for j in changed), "run", epoch, info.last_seq]
            timed("UPDATE runs", conn.execute, update_written_run_sql(changed), params)
            pending = PendingAppend(batch, rows, batch[0].seq, epoch, True, None, None)  # type: ignore[arg-type]
            timed("insert (_insert)", _insert, conn, pending)
            timed("RELEASE + COMMIT (FULL)", conn.execute, "RELEASE a")
            timed("RELEASE + COMMIT (FULL)", conn.execute, "COMMIT")
            info, old = after, new
    return {name: value / TOTAL * 1e6 for name, value in spent.items()}


def child(folder: Path) -> dict[str, Any]:
    """One tree's figures (see the module docstring)."""
    import msgpack
    from xxhash import xxh3_64_intdigest

    import agentlog
    from agentlog.eventlog._row_format import event_rows
    from benchmarks.harness import task_events

    events = task_events("batched_append", "run", 1, TOTAL)
    out: dict[str, Any] = {"tree": str(Path(agentlog.__file__).parents[1])}
    for durable in (True, False):
        measured = [
            asyncio.run(_append(folder / f"log-{durable}-{i}.db", events, durable))
            for i in range(3)
        ]
        out[f"durable={durable}"] = {
            "wall": statistics.median(m[0] for m in measured),
            "cpu": statistics.median(m[1] for m in measured),
        }
    out["pieces_us"] = asyncio.run(_pieces(folder / "pieces.db", events))
    batches = [event_rows(events[i : i + BATCH], 1, None) for i in range(0, TOTAL, BATCH)]
    dicts = [e.data.to_dict() for e in events]
    packer = msgpack.Packer(use_bin_type=True)
    flat = [r for b in batches for r in b]
    heads = [(r[6], f"{r[0]}\0{r[1]}\0{r[2]}\0{r[3]}\0{r[4]}\0{r[5]}".encode()) for r in flat]
    out["floor_us"] = {
        "msgpack": _best_us(lambda: [packer.pack(d) for d in dicts]),
        "xxh3": _best_us(
            lambda: [xxh3_64_intdigest(p, seed=xxh3_64_intdigest(h)) for p, h in heads]
        ),
        "insert executemany": min(
            _raw_insert(folder / f"em{i}.db", batches, "NORMAL", 0)[0] for i in range(3)
        ),
        "insert 124-row statements": min(
            _raw_insert(folder / f"ch{i}.db", batches, "NORMAL", 124)[0] for i in range(3)
        ),
    }
    durable = [_raw_insert(folder / f"full{i}.db", batches, "FULL", 124) for i in range(3)]
    out["floor_us"]["insert 124-row statements, FULL"] = statistics.median(c for c, _ in durable)
    out["floor_us"]["insert 124-row statements, FULL, wall"] = statistics.median(
        w for _, w in durable
    )
    out["load"] = os.getloadavg()[0]
    return out


def main(before: str, after: str, rounds: int) -> None:
    _CACHE.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for _ in range(rounds):
        for label, src in (("before", before), ("after", after)):
            folder = Path(tempfile.mkdtemp(prefix="ab-batched-", dir=_CACHE))
            try:
                env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, str(_ROOT)])}
                done = subprocess.run(
                    [sys.executable, "-m", "benchmarks.ab_batched_append", "--child", str(folder)],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                    cwd=_ROOT,
                )
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            line = json.loads(done.stdout.strip().splitlines()[-1])
            results[label].append(line)
            print(label, json.dumps(line), flush=True)
    for label, lines in results.items():
        print(f"\n{label} (medians of {len(lines)} children)")
        for case in ("durable=True", "durable=False"):
            wall = statistics.median(x[case]["wall"] for x in lines)
            cpu = statistics.median(x[case]["cpu"] for x in lines)
            print(f"  {case}: {wall:,.0f} events/s wall, {cpu:,.0f} per CPU second")
        for name in lines[0]["pieces_us"]:
            value = statistics.median(x["pieces_us"][name] for x in lines)
            print(f"  piece {name}: {value:.2f} us an event")
        for name in lines[0]["floor_us"]:
            value = statistics.median(x["floor_us"][name] for x in lines)
            print(f"  floor {name}: {value:.2f} us an event")
        loads = [x["load"] for x in lines]
        print(f"  load (1 min): {min(loads):.2f} to {max(loads):.2f}")


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        print(json.dumps(child(Path(sys.argv[2]))))
    else:
        main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 4)
