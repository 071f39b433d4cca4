"""Encryption at rest: what sealing payloads costs, on vs off in the same run.

1. A durable step: the runtime's one-step loop on SQLite in sync mode (each
   step appends a ~500-byte message; step N+1 starts once step N's events
   are committed with synchronous=FULL), as in ``bench_runtime``. Per-step
   samples are the times between consecutive step starts.
2. Batched append: ``SqliteEventLog.append`` of 1,000 TaskCompleted events
   (each a ~500-byte conversation message) per durable batch.

Each is measured with no key store and with a local keyring
(``PayloadCipher(LocalKeyStore)``: AES-256-GCM per event, one data key per
run), alternating the two rounds after round so that both see the same
machine. The target is an overhead of at most 15% on the median.

3. The floor: AES-256-GCM alone (``AESGCM.encrypt`` with a fresh nonce) of the
   same 1,000 payloads, as msgpack, per batch; ``floor_ratio`` is what a
   sealed batch would cost if sealing were that and nothing else (plain
   batch + this) over the plain batch. The sealed payload is also ~65 bytes
   bigger (envelope header with the key id, nonce, tag, the ``_sealed``
   key), which SQLite writes and fsyncs too.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.eventlog._packing import pack
from agentlog.eventlog.events import Event, TaskCompleted
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.runtime import Runtime, RuntimeConfig, StepContext, Workflow, end, goto
from agentlog.runtime._workflow import Next
from benchmarks import payloads
from benchmarks.harness import Row, row_from_samples

AREA = "encryption"
MESSAGE_BYTES = payloads.PAYLOAD_BYTES
BATCH = 1000
TARGET = 1.15
ROOT = Path(__file__).resolve().parent.parent / ".cache" / "bench"


def _workdir() -> Path:
    ROOT.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=ROOT))


def _messages(count: int) -> list[dict[str, Any]]:
    r = payloads.rng("encryption")
    return [payloads.conversation_message(r, i, MESSAGE_BYTES) for i in range(count)]


def _cipher(folder: Path, encrypted: bool) -> PayloadCipher | None:
    return PayloadCipher(LocalKeyStore(folder / "keyring.json")) if encrypted else None


async def _step_samples(steps: int, encrypted: bool) -> list[float]:
    """Seconds between consecutive step starts of one sync-mode run."""
    folder = _workdir()
    messages = _messages(steps)
    starts: list[float] = []
    wf = Workflow("bench-enc", state={"messages": "append", "n": "replace"}, max_steps=steps + 10)

    @wf.step
    async def loop(ctx: StepContext) -> Next:
        starts.append(time.perf_counter())
        n = ctx.state.get("n", 0) + 1
        if n >= steps:
            return end(messages=[messages[n - 1]], n=n)
        return goto("loop", messages=[messages[n - 1]], n=n)

    try:
        event_log = SqliteEventLog(str(folder / "log.db"), cipher=_cipher(folder, encrypted))
        async with Runtime(event_log, workflows=[wf], config=RuntimeConfig()) as runtime:
            await runtime.start(wf, run_id="bench", durability="sync")
            state = await runtime.wait("bench")
        await event_log.close()
        assert state.status == "completed" and state.steps == steps, state.status
        return [b - a for a, b in itertools.pairwise(starts)]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def _batch_samples(batches: int, encrypted: bool) -> list[float]:
    """Seconds per durable append of :data:`BATCH` events."""
    folder = _workdir()
    messages = _messages(BATCH)
    samples = []
    try:
        async with SqliteEventLog(
            str(folder / "log.db"), cipher=_cipher(folder, encrypted)
        ) as event_log:
            epoch = await event_log.claim_writer("bench")
            seq = 0
            for _ in range(batches):
                events = [
                    Event("bench", seq + i, TaskCompleted(f"k{seq + i}", msg), writer_epoch=epoch)
                    for i, msg in enumerate(messages, start=1)
                ]
                started = time.perf_counter()
                await event_log.append(events, durable=True)
                samples.append(time.perf_counter() - started)
                seq += BATCH
        return samples
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _aead_samples(batches: int) -> list[float]:
    """Seconds to AES-256-GCM :data:`BATCH` payloads alone, a fresh nonce each."""
    aead = AESGCM(AESGCM.generate_key(bit_length=256))
    raws = [pack({"result": msg}) for msg in _messages(BATCH)]
    aad = b"x" * 64  # about the size of an event's associated data
    samples = []
    for _ in range(batches):
        started = time.perf_counter()
        for raw in raws:
            aead.encrypt(os.urandom(12), raw, aad)
        samples.append(time.perf_counter() - started)
    return samples


def _pair(name: str, off: list[float], on: list[float], unit: str, **extra: Any) -> list[Row]:
    plain = row_from_samples(AREA, f"{name}, encryption off", off, unit=unit, **extra)
    sealed = row_from_samples(AREA, f"{name}, encryption on", on, unit=unit, **extra)
    ratio = sealed.median / plain.median
    sealed.extra.update(
        ratio_vs_off=round(ratio, 3),
        p99_ratio=round((sealed.p99 or 0) / (plain.p99 or 1), 3),
        target=f"<= {TARGET}x",
        met=ratio <= TARGET,
    )
    return [plain, sealed]


def collect(quick: bool) -> list[Row]:
    """Sync steps and batched appends, encryption off and on, rounds alternating."""
    steps, batches, rounds = (60, 4, 2) if quick else (400, 20, 4)
    step_off: list[float] = []
    step_on: list[float] = []
    batch_off: list[float] = []
    batch_on: list[float] = []
    aead: list[float] = []
    for _ in range(rounds):
        step_off += asyncio.run(_step_samples(steps, False))
        step_on += asyncio.run(_step_samples(steps, True))
        batch_off += asyncio.run(_batch_samples(batches, False))
        batch_on += asyncio.run(_batch_samples(batches, True))
        aead += _aead_samples(batches)
    rows = _pair("sync step (sqlite, ~500 B message)", step_off, step_on, "ms", steps=steps)
    per_batch = f"{BATCH} events of ~{MESSAGE_BYTES} B"
    rows += _pair(f"durable append, batches of {per_batch}", batch_off, batch_on, "ms")
    for row in rows[2:]:
        row.extra["events_per_s"] = round(BATCH / (row.median / 1e3))
    floor = row_from_samples(AREA, f"AES-GCM alone, {per_batch}", aead, unit="ms")
    floor.extra["floor_ratio"] = round((rows[2].median + floor.median) / rows[2].median, 3)
    return [*rows, floor]
