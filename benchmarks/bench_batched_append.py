"""Batched append on SQLite, plain and sealed, beside its floors (issue 23, item 9).

One run's events (the shared task results of :func:`benchmarks.harness.task_events`,
~500 bytes each) appended in batches of 1,000, three fresh files per case,
the cases alternating; events per second (wall clock) and events per CPU
second (the process, both threads: the machine is shared). Then, per event,
in the same process (CPU, best of three):

* the caller's row building (:func:`~agentlog.eventlog._row_format.event_rows`),
  plain and sealed;
* the floors: ``to_dict`` and msgpack of each payload, the row checksum, the
  raw ``executemany`` of the same rows into the same table (one transaction
  a batch, WAL, ``synchronous=NORMAL``), and AES-GCM of each payload (one
  ``encrypt`` call each, the nonces drawn from the OS at once, as the log's
  batch sealer draws them).

``floor`` rows say what a target is up against: plain >= 200,000 events/s
is 5 µs an event in all; sealed <= 1.15x plain.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgpack
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

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
) -> tuple[float, float]:
    """Events per wall second and per CPU second of appending ``events`` in batches."""
    async with SqliteEventLog(path, cipher=cipher) as log:
        epoch = await log.claim_writer(events[0].run_id)
        mine = [Event(e.run_id, e.seq, e.data, e.ts, epoch) for e in events]
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(0, len(mine), BATCH):
            await log.append(mine[i : i + BATCH], durable=durable)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return len(mine) / wall, len(mine) / cpu


def _raw_insert_us(path: Path, batches: list[list[tuple[Any, ...]]], events: int) -> float:
    """The raw executemany of the same rows, one transaction a batch: CPU µs an event."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
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
            conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
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
            measured: dict[str, list[tuple[float, float]]] = {"plain": [], "sealed": []}
            for i in range(3):
                for label, c in (("plain", None), ("sealed", cipher)):
                    path = folder / f"{label}-{durable}-{i}.db"
                    measured[label].append(asyncio.run(_append(path, events, durable, c)))
            for label, pairs in measured.items():
                wall = statistics.median(w for w, _ in pairs)
                cpu = statistics.median(c for _, c in pairs)
                rows.append(
                    Row(
                        AREA,
                        f"{label} append, batches of {BATCH:,}, durable={durable}",
                        "events/s",
                        wall,
                        None,
                        {
                            "rounds": " / ".join(f"{w:,.0f}" for w, _ in pairs),
                            "per_cpu_second": round(cpu),
                            "cpu_us_an_event": round(1e6 / cpu, 2),
                            "load": load,
                            "target": ">= 200,000 events/s" if label == "plain" else "",
                        },
                        len(pairs),
                    )
                )
            plain = statistics.median(c for _, c in measured["plain"])
            sealed = statistics.median(c for _, c in measured["sealed"])
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
        dicts = [e.data.to_dict() for e in events]
        packer = msgpack.Packer(use_bin_type=True)
        floors = {
            "to_dict": _cpu_us(lambda: [e.data.to_dict() for e in events], total),
            "msgpack": _cpu_us(lambda: [packer.pack(d) for d in dicts], total),
            "row checksum": _cpu_us(
                lambda: [row_checksum(*r[:7]) for b in built for r in b], total
            ),
            "sqlite insert": min(
                _raw_insert_us(folder / f"raw{i}.db", built, total) for i in range(3)
            ),
        }
        aead = AESGCM(AESGCM.generate_key(bit_length=256))
        raws = [r[6] for b in built for r in b]
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
    plain_floor = floors["to_dict"] + floors["msgpack"] + floors["row checksum"]
    plain_floor += floors["sqlite insert"]
    rows.append(
        _row(
            "plain floor (to_dict + msgpack + checksum + raw insert)",
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
