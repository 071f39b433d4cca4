"""Write the stored sealed rows: ``python -m tests.golden.make_sealed_rows``.

Run it ONLY with the agentlog whose row writer is to be pinned (then commit
the files). ``test_sealed_rows.py`` never regenerates: it reads the
committed rows with the committed keyring through today's row reader, so a
change to the batched, sealed row writer (issue 23, item 9) that stops
rows written before it from reading fails the test.

``sealed_rows_s31*`` were written by the row writer of session 31 (before
the payloads were read by compiled field readers and packed by ormsgpack):
one SQLite batch of :func:`events` through ``event_rows`` with a cipher,
each row as ``(seq, type, ts, schema_v, writer_epoch, payload, checksum)``.
"""

from __future__ import annotations

import base64
import json
import shutil
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.eventlog._row_format import event_rows
from agentlog.eventlog.events import (
    Event,
    InterruptRaised,
    RunCompleted,
    RunStarted,
    StepCompleted,
    SuperstepCommitted,
    TaskCompleted,
    TaskFailed,
    WriterClaimed,
)

HERE = Path(__file__).parent
RUN = "sealed-rows"
EPOCH = 3
T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def events() -> list[Event]:
    """One run's batch: clear events, sealed ones, Send inputs (envelope version 3)."""
    payloads = [
        RunStarted("wf", "1", {"topic": "rows", "n": [1, 2.5, None]}, "sync", "fp"),
        WriterClaimed(EPOCH),  # metadata only: stored in clear
        TaskCompleted("k1", {"hits": [{"title": "é", "score": 0.5}], "raw": b"\x00\xff"}),
        TaskFailed("k2", "ValueError: no"),
        StepCompleted("plan", 1, 0, {"todo": ["a", "b"]}, [{"step": "work", "input": {"i": 1}}]),
        SuperstepCommitted(1, ["work", {"step": "work", "input": {"i": 2}}]),
        SuperstepCommitted(2, ["review"]),  # branches without a Send input
        InterruptRaised("review", 2, 0, 0, {"ask": "ok?"}, due_at=T0 + timedelta(days=1)),
        RunCompleted({"done": True}),
    ]
    return [
        Event(RUN, seq, data, T0 + timedelta(seconds=seq), EPOCH)
        for seq, data in enumerate(payloads, start=1)
    ]


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        keyring = Path(tmp) / "keyring.json"
        rows = event_rows(events(), EPOCH, PayloadCipher(LocalKeyStore(keyring)))
        shutil.copyfile(keyring, out / "sealed_rows_s31_keyring.json")
    stored: list[list[Any]] = [
        [*row[1:6], base64.b64encode(row[6]).decode("ascii"), row[7]] for row in rows
    ]
    (out / "sealed_rows_s31.json").write_text(json.dumps(stored, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
