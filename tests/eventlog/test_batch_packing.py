"""A batch's payloads packed with one look-up of the thread's Packer (issue 23, item 9).

:func:`agentlog.eventlog._packing.pack_each` is :func:`pack` of each value:
the same bytes, the same error naming the bad part, and the same rule that a
Packer which grew past the kept buffer is dropped. A batched append of events
built by hand goes through it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentlog.errors import NotSerializableError
from agentlog.eventlog import Event, TaskCompleted, _packing
from agentlog.eventlog._packing import pack, pack_each
from agentlog.eventlog.sqlite import SqliteEventLog

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_each_value_packs_to_packs_bytes() -> None:
    values = [{"a": 1}, {"b": [b"x", 2.5, None]}, {"c": T0}]
    assert pack_each(values, ["A", "B", "C"]) == [pack(v) for v in values]


def test_a_bad_value_is_named_by_its_path() -> None:
    with pytest.raises(NotSerializableError) as caught:
        pack_each([{"ok": 1}, {"r": {3}}, {"ok": 2}], ["first", "TaskCompleted", "third"])
    assert caught.value.path == "TaskCompleted['r']"


def test_a_packer_grown_past_the_kept_buffer_is_dropped() -> None:
    pack_each([{"small": 1}], ["x"])
    assert _packing._PACKERS.packer is not None
    pack_each([{"big": b"\0" * (_packing._KEEP_BUFFER + 1)}, {"small": 1}], ["x", "y"])
    assert _packing._PACKERS.packer is None


async def test_a_batch_with_one_bad_payload_writes_nothing(tmp_path: Path) -> None:
    async with SqliteEventLog(tmp_path / "log.db") as log:
        epoch = await log.claim_writer("r")
        results = [{"n": 1}, {"n": {2}}, {"n": 3}]
        events = [
            Event("r", seq, TaskCompleted(f"k{seq}", result), T0, epoch)
            for seq, result in enumerate(results, start=1)
        ]
        with pytest.raises(NotSerializableError) as caught:
            await log.append(events)
        assert caught.value.path == "TaskCompleted['result']['n']"
        assert [e async for e in log.read("r")] == []
