"""Batched append on SQLite, plain and sealed, beside its floors (issue 23, item 9).

One run's events (the shared task results of :func:`benchmarks.harness.task_events`,
~500 bytes each) appended in batches of 1,000, three fresh files per case,
the cases alternating; events per second (wall clock) and events per CPU
second (the process, both threads: the machine is shared), and the CPU of
each thread apart (the caller's, which builds the rows, and the log's
worker thread, which writes them). Then, per event, in the same process
(CPU, best of three):

* the caller's row building (:func:`~agentlog.eventlog._row_format.event_rows`),
  plain and sealed;
* the floors, the library calls alone: msgpack of each payload's map (one
  Packer, as the log packs a batch; ormsgpack beside it: faster, but it
  stores values msgpack refuses, so the log does not use it), the row
  checksum's two xxh3 digests, the
  raw insert of the same rows into the same table (one transaction a batch,
  WAL, ``synchronous=NORMAL``, 8 KiB pages as the log's) by multi-row
  INSERTs of 124 rows, as the log inserts a big batch (session 33; raw
  ``executemany``, session 32's floor, beside it), and AES-GCM of each payload (one
  ``encrypt`` call each, the nonces drawn from the OS at once, as the log's
  batch sealer draws them); and the Python of each step beside them (the
  payload's map, the checksum's head).

``floor`` rows say what a target is up against: plain >= 200,000 events/s
is 5 µs an event in all; sealed <= 1.15x plain.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

import msgpack
import ormsgpack
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from xxhash import xxh3_64_intdigest

from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.eventlog import Event
from agentlog.eventlog._row_format import event_rows
from agentlog.eventlog.codec import row_checksum
from agentlog.eventlog.sqlite import SqliteEventLog
from benchmarks.harness import Row, task_events

AREA = "batched_append"
BATCH = 1_000


def _load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def _cpu_us(fn: Callable[[], Any], events: int, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best / events * 1e6


async def _append(
    path: Path, events: Sequence[Event], durable: bool, cipher: PayloadCipher | None
) -> tuple[float, float, float, float]:
    """Events per wall second and per CPU second of appending ``events`` in batches,
    and the CPU µs an event of the caller's thread and of the log's worker thread."""
    async with SqliteEventLog(path, cipher=cipher) as log:
        epoch = await log.claim_writer(events[0].run_id)
        mine = [Event(e.run_id, e.seq, e.data, e.ts, epoch) for e in events]
        worker = await log._worker.run(time.thread_time)
        wall, cpu, caller = time.perf_counter(), time.process_time(), time.thread_time()
        for i in range(0, len(mine), BATCH):
            await log.append(mine[i : i + BATCH], durable=durable)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        caller = time.thread_time() - caller
        worker = await log._worker.run(time.thread_time) - worker
    n = len(mine)
    return n / wall, n / cpu, caller / n * 1e6, worker / n * 1e6


def _raw_insert_us(
    path: Path, batches: list[list[tuple[Any, ...]]], events: int, chunk: int = 0
) -> float:
    """The raw insert of the same rows, one transaction a batch, by multi-row
    INSERTs of ``chunk`` rows (0: ``executemany``): CPU µs an event."""
    conn = sqlite3.connect(path, isolation_level=None)
    insert = "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    try:
        conn.execute("PRAGMA page_size=8192")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(
            "CREATE TABLE events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,"
            " ts INTEGER NOT NULL, schema_v INTEGER NOT NULL, writer_epoch INTEGER NOT NULL,"
            " payload BLOB NOT NULL, checksum INTEGER, PRIMARY KEY (run_id, seq)) WITHOUT ROWID"
        )
        start = time.process_time()
        for rows in batches:
            conn.execute("BEGIN")
            if chunk:
                flat = list(chain.from_iterable(rows))
                for i in range(0, len(flat), chunk * 8):
                    part = flat[i : i + chunk * 8]
                    conn.execute(insert + ",(?,?,?,?,?,?,?,?)" * (len(part) // 8 - 1), part)
            else:
                conn.executemany(insert, rows)
            conn.execute("COMMIT")
        return (time.process_time() - start) / events * 1e6
    finally:
        conn.close()


def _row(name: str, value: float, unit: str, **extra: Any) -> Row:
    return Row(AREA, name, unit, value, None, extra, 1)


def collect(quick: bool) -> list[Row]:
    """Plain and sealed batched appends and their floors (``quick``: 20,000 events)."""
    total = 20_000 if quick else 100_000
    events = task_events(AREA, "run", 1, total)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cipher = PayloadCipher(LocalKeyStore(folder / "keyring.json"))
        load = _load()
        for durable in (False, True):
            measured: dict[str, list[tuple[float, float, float, float]]] = {
                "plain": [],
                "sealed": [],
            }
            for i in range(3):
                for label, c in (("plain", None), ("sealed", cipher)):
                    path = folder / f"{label}-{durable}-{i}.db"
                    measured[label].append(asyncio.run(_append(path, events, durable, c)))
            for label, pairs in measured.items():
                wall = statistics.median(p[0] for p in pairs)
                cpu = statistics.median(p[1] for p in pairs)
                rows.append(
                    Row(
                        AREA,
                        f"{label} append, batches of {BATCH:,}, durable={durable}",
                        "events/s",
                        wall,
                        None,
                        {
                            "rounds": " / ".join(f"{p[0]:,.0f}" for p in pairs),
                            "per_cpu_second": round(cpu),
                            "cpu_us_an_event": round(1e6 / cpu, 2),
                            "caller_thread_us": round(statistics.median(p[2] for p in pairs), 2),
                            "worker_thread_us": round(statistics.median(p[3] for p in pairs), 2),
                            "load": load,
                            "target": ">= 200,000 events/s" if label == "plain" else "",
                        },
                        len(pairs),
                    )
                )
            plain = statistics.median(p[1] for p in measured["plain"])
            sealed = statistics.median(p[1] for p in measured["sealed"])
            rows.append(
                _row(
                    f"sealed over plain, CPU per event, durable={durable}",
                    plain / sealed,
                    "x",
                    target="<= 1.15x",
                    load=load,
                )
            )
        batches = [events[i : i + BATCH] for i in range(0, total, BATCH)]
        load = _load()
        built = [event_rows(b, 1, None) for b in batches]
        plain_rows = _cpu_us(lambda: [event_rows(b, 1, None) for b in batches], total)
        sealed_rows = _cpu_us(lambda: [event_rows(b, 1, cipher) for b in batches], total)
        datas = [e.data for e in events]
        dicts = [d.to_dict() for d in datas]
        packer = msgpack.Packer(use_bin_type=True)
        fields = [f.name for f in dataclasses.fields(datas[0])]  # type: ignore[arg-type]
        flat = [r for b in built for r in b]
        payload_heads = [
            (r[6], f"{r[0]}\0{r[1]}\0{r[2]}\0{r[3]}\0{r[4]}\0{r[5]}".encode()) for r in flat
        ]
        floors = {
            "msgpack": _cpu_us(lambda: [packer.pack(d) for d in dicts], total),
            "sqlite insert, 124-row INSERTs": min(
                _raw_insert_us(folder / f"raw{i}.db", built, total, 124) for i in range(3)
            ),
            "xxh3 of the row": _cpu_us(
                lambda: [xxh3_64_intdigest(p, seed=xxh3_64_intdigest(h)) for p, h in payload_heads],
                total,
            ),
        }
        beside = {
            "sqlite executemany (session 32's floor)": min(
                _raw_insert_us(folder / f"many{i}.db", built, total) for i in range(3)
            ),
            "ormsgpack (not used: see above)": _cpu_us(
                lambda: [ormsgpack.packb(d) for d in dicts], total
            ),
            "payload map, to_dict (compiled reader)": _cpu_us(
                lambda: [d.to_dict() for d in datas], total
            ),
            "payload map, getattr per field (replaced)": _cpu_us(
                lambda: [{n: getattr(d, n) for n in fields} for d in datas], total
            ),
            "row checksum (codec.row_checksum)": _cpu_us(
                lambda: [row_checksum(*r[:7]) for r in flat], total
            ),
        }
        aead = AESGCM(AESGCM.generate_key(bit_length=256))
        raws = [r[6] for r in flat]
        aad = b"x" * 64  # about an event's associated data
        nonces = os.urandom(12 * total)  # drawn once a batch, as BatchSealer draws them
        floors["AES-GCM"] = _cpu_us(
            lambda: [
                aead.encrypt(nonces[i * 12 : i * 12 + 12], raw, aad) for i, raw in enumerate(raws)
            ],
            total,
        )
    rows.append(_row("per event: caller's rows, plain", plain_rows, "us", load=load))
    rows.append(_row("per event: caller's rows, sealed", sealed_rows, "us", load=load))
    for name, value in floors.items():
        rows.append(_row(f"per event: floor: {name}", value, "us", load=load))
    for name, value in beside.items():
        rows.append(_row(f"per event: beside: {name}", value, "us", load=load))
    plain_floor = (
        floors["msgpack"] + floors["xxh3 of the row"] + floors["sqlite insert, 124-row INSERTs"]
    )
    rows.append(
        _row(
            "plain floor (msgpack + xxh3 + raw 124-row INSERTs)",
            1e6 / plain_floor,
            "events/s",
            us_an_event=round(plain_floor, 2),
            target=">= 200,000 events/s",
            load=load,
        )
    )
    rows.append(
        _row(
            "sealed floor over plain floor (+ AES-GCM)",
            (plain_floor + floors["AES-GCM"]) / plain_floor,
            "x",
            target="<= 1.15x",
            load=load,
        )
    )
    return rows
