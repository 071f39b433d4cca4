"""The archive copies each payload as the hot log stores it (issue 23, item 9).

Packing every decoded payload again cost the archiver about a fifth of its
time; the bytes a SQLite log stores (checksum verified on the read) are
what the Parquet ``payload`` column held anyway. These tests pin the
mechanism by counting, not by timing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import pyarrow.parquet as pq
import pytest

from agentlog.archive import ArchivedEventReader, Archiver, LocalArchiveStore, _rows, open_sql
from agentlog.archive._parquet import Manifest
from agentlog.eventlog import MemoryEventLog
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.archive.helpers import read_all, record_run
from tests.support.archive import NOW


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the archive's calls of the real msgpack ``pack``."""
    calls = [0]
    real: Callable[..., bytes] = _rows.pack

    def pack(*args: Any, **kwargs: Any) -> bytes:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(_rows, "pack", pack)
    return calls


def _archived_payloads(store: LocalArchiveStore) -> dict[tuple[str, int], tuple[bytes, int]]:
    rows: dict[tuple[str, int], tuple[bytes, int]] = {}
    for entry in Manifest.load(store).entries.values():
        table = pq.read_table(store.root / entry.file)
        for run_id, seq, payload, schema_v in zip(
            *(table.column(c).to_pylist() for c in ("run_id", "seq", "payload", "schema_v")),
            strict=True,
        ):
            rows[(run_id, seq)] = (payload, schema_v)
    return rows


async def test_sqlite_payloads_are_copied_not_packed_again(
    hot: SqliteEventLog, store: LocalArchiveStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = {
        run_id: await record_run(hot, run_id, tag=k)
        for k, run_id in enumerate(["r1", "r2", "r3"], start=1)
    }
    with sqlite3.connect(hot.path) as raw:
        stored = {
            (run_id, seq): (payload, schema_v)
            for run_id, seq, payload, schema_v in raw.execute(
                "SELECT run_id, seq, payload, schema_v FROM events"
            )
        }
    calls = _counting(monkeypatch)

    summary = await Archiver(hot, store).run(now=NOW)

    assert summary.events == len(stored) == sum(len(v) for v in expected.values())
    assert calls[0] == 0, f"the archive packed {calls[0]} payloads the hot log had stored"
    assert _archived_payloads(store) == stored  # byte for byte, with their schema version
    history = ArchivedEventReader(hot, store)  # and the readers still decode them
    for run_id, events in expected.items():
        assert await read_all(history, run_id) == events
    await history.close()
    db = await open_sql(store)
    try:
        found = db.sql("SELECT count(*) FROM tasks WHERE name = 'fetch'").fetchone()
        assert found is not None and found[0] > 0
    finally:
        db.close()


async def test_a_log_without_stored_bytes_is_packed_to_the_same_bytes(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memory log keeps objects, not bytes: the archive packs them, once each."""
    log = MemoryEventLog()
    events = await record_run(log, "m", tag=7)
    store = LocalArchiveStore(tmp_path / "archive")
    calls = _counting(monkeypatch)

    await Archiver(log, store).run(now=NOW)

    assert calls[0] == len(events)
    sqlite_log = SqliteEventLog(tmp_path / "same.db")
    try:
        await record_run(sqlite_log, "m", tag=7)
        with sqlite3.connect(sqlite_log.path) as raw:
            stored = {
                ("m", seq): (payload, schema_v)
                for seq, payload, schema_v in raw.execute(
                    "SELECT seq, payload, schema_v FROM events"
                )
            }
    finally:
        await sqlite_log.close()
    assert _archived_payloads(store) == stored
