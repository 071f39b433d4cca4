"""An event the runtime writes is packed once: by the writer, never again by the log.

Issue 23 items 6 and 7: :meth:`RunWriter.emit` packs each payload to check
and normalise it, and the log's append used to pack it again. The append now
stores the writer's bytes. Pinned by counting the payload maps given to the
thread's msgpack Packer (never by timing): one per event, from emit to the
event in the log. A sealed log seals the content apart, so its own packing
stays; what it stores still reads back (tests/eventlog/test_sealing.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentlog.eventlog import _packing
from agentlog.eventlog._base import EventLog
from agentlog.eventlog._row_format import event_from_row, event_rows
from agentlog.eventlog.codec import decode_event, encode_event
from agentlog.eventlog.events import (
    Event,
    EventData,
    ProgressReported,
    StepCompleted,
    TaskStarted,
    WriterClaimed,
)
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.projector._snapshots import SnapshotPolicy
from agentlog.projector._state import RunState
from agentlog.runtime._writer import RunWriter

_EVENTS: list[EventData] = [
    TaskStarted("r:0:0:t:0", "t", "plan", 1, 0, 0, 1),
    ProgressReported("plan", 0, 0, {"done": (1, 2), "note": "half"}),
    StepCompleted("plan", 0, 0, {"messages": ["hello"]}),
]


class _CountingPacker:
    """The thread's Packer, counting the maps (payloads) it packs, alone or
    in an array (the Kafka envelope)."""

    def __init__(self, real: Any, maps: list[dict[str, Any]]) -> None:
        self.real, self.maps = real, maps

    def pack(self, value: Any) -> bytes:
        if isinstance(value, dict):
            self.maps.append(value)
        elif isinstance(value, list):
            self.maps.extend(item for item in value if isinstance(item, dict))
        raw: bytes = self.real.pack(value)
        return raw


@contextlib.contextmanager
def _counting_payload_packs() -> Iterator[list[dict[str, Any]]]:
    """The payload maps packed on this thread while the block runs."""
    maps: list[dict[str, Any]] = []
    real = _packing._packer()
    _packing._PACKERS.packer = _CountingPacker(real, maps)
    try:
        yield maps
    finally:
        _packing._PACKERS.packer = real


async def _writer(log: EventLog) -> RunWriter:
    epoch = await log.claim_writer("r", owner="test")
    writer = RunWriter(
        log,
        RunState(run_id="r"),
        epoch=epoch,
        durability="sync",
        snapshots=SnapshotPolicy(on_park=False),
    )
    writer.emit(WriterClaimed(epoch, "test"))
    await writer.flush()
    return writer


async def _emit_and_flush(log: EventLog) -> tuple[list[Event], list[dict[str, Any]]]:
    writer = await _writer(log)
    with _counting_payload_packs() as maps:
        events = [writer.emit(data) for data in _EVENTS]
        await writer.flush()
    return events, maps


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_an_appended_event_is_packed_once(backend: str, tmp_path: Path) -> None:
    log: EventLog = MemoryEventLog() if backend == "memory" else SqliteEventLog(tmp_path / "log.db")
    async with contextlib.AsyncExitStack() as stack:
        if isinstance(log, SqliteEventLog):
            await stack.enter_async_context(log)
        events, maps = await _emit_and_flush(log)
        assert len(maps) == len(_EVENTS), [sorted(m) for m in maps]
        stored = [e async for e in log.read("r", after_seq=1)]
        assert stored == events  # and what was stored reads back as the live state saw it


async def test_rows_and_frames_reuse_the_writers_bytes() -> None:
    """The row format (SQLite, PostgreSQL, Redis) and the Kafka frame of an
    event the writer made pack no payload again, and decode to the same event."""
    events, _ = await _emit_and_flush(MemoryEventLog())
    with _counting_payload_packs() as maps:
        rows = event_rows(events, 1, None)
        frames = [encode_event(event) for event in events]
    assert maps == []
    assert [event_from_row("r", row[1:], "test", None) for row in rows] == events
    assert [decode_event(raw) for raw in frames] == events
    # The very bytes the log's own packing makes (a copy carries no packed bytes).
    copies = [dataclasses.replace(event) for event in events]
    assert all(copy.packed is None for copy in copies)
    assert event_rows(copies, 1, None) == rows
    assert [encode_event(copy) for copy in copies] == frames


def test_an_event_built_by_hand_is_packed_by_the_log() -> None:
    """An event made without the writer (a copy, an import) has no bytes to reuse."""
    events = [Event("r", seq, data, writer_epoch=1) for seq, data in enumerate(_EVENTS, 1)]
    assert all(event.packed is None for event in events)
    rows = event_rows(events, 1, None)  # packed by ormsgpack first (issue 23, item 9)
    assert [row[6] for row in rows] == [_packing.pack(e.data.to_dict()) for e in events]
    read = [event_from_row("r", row[1:], "test", None) for row in rows]
    assert [(e.seq, e.type) for e in read] == [(e.seq, e.type) for e in events]
