"""Payload encryption: seal + open of one payload, and a run's first key.

- seal + open of a 500-byte and a 50 KB payload with AES-256-GCM, its data
  key already in the cache (the steady state of a run);
- the first ``wrap`` of a run on a local keyring file already holding N runs:
  the file is rewritten atomically (fsync) per new run, so this grows with N.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from agentlog.crypto import LocalKeyStore, PayloadCipher
from benchmarks.harness import Row, row_from_samples, time_calls

AREA = "crypto"
ROOT = Path(__file__).resolve().parent.parent / ".cache" / "bench"


def collect(quick: bool) -> list[Row]:
    """Seal+open latency by payload size, and new-run key latency by keyring size."""
    ROOT.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=ROOT))
    rows = []
    try:
        cipher = PayloadCipher(LocalKeyStore(folder / "keyring.json"))
        cipher.seal("bench", 0, "event", b"warm the key cache")
        for size, label in ((500, "500 B"), (50_000, "50 KB")):
            payload = os.urandom(size)
            seq = iter(range(1, 10**9))

            def round_trip(payload: bytes = payload, seq: Iterator[int] = seq) -> None:
                n = next(seq)
                cipher.open("bench", n, "event", cipher.seal("bench", n, "event", payload))

            samples = time_calls(round_trip, 2_000 if quick else 20_000)
            rows.append(row_from_samples(AREA, f"seal + open {label}", samples, unit="us"))
        for existing in (100, 2_000) if quick else (100, 2_000, 20_000):
            keyring = LocalKeyStore(folder / f"ring-{existing}.json")
            _fill(keyring, existing)
            names = iter(range(10**9))
            samples = time_calls(
                lambda k=keyring, names=names: k.wrap(f"new-{next(names)}"), 20, warmup=2
            )
            rows.append(
                row_from_samples(AREA, f"new run key, keyring of {existing:,} runs", samples)
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return rows


def _fill(keyring: LocalKeyStore, count: int) -> None:
    """Add ``count`` run keys in one write (filling run by run would take minutes)."""
    from agentlog.crypto._tables import _record

    keyring.wrap("seed")
    entries = {}
    for i in range(count):
        _, wrapped = keyring.wrapper.new_data_key(f"fill-{i}")
        entries[wrapped.run_id] = _record(wrapped)
    keyring.table.file.update(lambda doc: (doc["runs"].update(entries), True))  # type: ignore[attr-defined]
