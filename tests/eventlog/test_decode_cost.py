"""What decoding a stored event costs, pinned by counting calls, never by timing.

Issue 23 item 8: decoding an event cost four times its floor, most of it
building objects and checking each field's type with a call per field after
the checksum had passed. The field types are still checked (a payload of the
wrong shape is a CorruptEventError, see test_codec.py and
test_storage_integrity.py); what is pinned here is that the check costs no
Python call per field: decoding an event of seven fields makes as many
Python calls as decoding one of a single field.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from agentlog.errors import CorruptEventError
from agentlog.eventlog._row_format import event_from_row, event_rows
from agentlog.eventlog.codec import decode_event, encode_event, pack, row_checksum
from agentlog.eventlog.events import Event, EventData, RunFailed, StepCompleted, TaskStarted
from agentlog.eventlog.sqlite import SqliteEventLog

_N = 50


@contextlib.contextmanager
def _counting_calls() -> Iterator[list[int]]:
    """Count the Python functions called on this thread (C functions are not
    counted) while the block runs; the count is the yielded list's one item."""
    count = [0]

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            count[0] += 1

    sys.setprofile(profile)
    try:
        yield count
    finally:
        sys.setprofile(None)


def _python_calls(decode: Callable[[], object]) -> int:
    """How many Python functions ``decode`` calls (C functions are not counted)."""
    with _counting_calls() as count:
        decode()
    return count[0]


def _events(data: EventData) -> list[Event]:
    return [Event("run", seq, data, writer_epoch=1) for seq in range(1, _N + 1)]


_SEVEN = TaskStarted("run:0:0:t:0", "t", "step", 3, 0, 0, 2)  # 7 fields, all type-checked
_ONE = RunFailed("boom")  # 1 field


def _row_decoder(events: list[Event]) -> Callable[[], object]:
    rows = [row[1:] for row in event_rows(events, 1, None)]
    return lambda: [event_from_row("run", row, "test", None) for row in rows]


def _frame_decoder(events: list[Event]) -> Callable[[], object]:
    frames = [encode_event(event) for event in events]
    return lambda: [decode_event(raw) for raw in frames]


@pytest.mark.parametrize("decoder", [_row_decoder, _frame_decoder], ids=["row", "frame"])
def test_decoding_makes_no_python_call_per_field(
    decoder: Callable[[list[Event]], Callable[[], object]],
) -> None:
    """A stored row (SQLite, PostgreSQL, Redis) or Kafka frame of seven fields
    decodes with exactly as many Python calls as one of one field."""
    sevens, ones = _events(_SEVEN), _events(_ONE)
    decode_seven, decode_one = decoder(sevens), decoder(ones)
    assert decode_seven() == sevens  # the quick build gives the same events
    assert decode_one() == ones
    seven, one = _python_calls(decode_seven), _python_calls(decode_one)
    assert seven == one, (
        f"decoding {_N} events of 7 fields made {seven} Python calls, of 1 field {one}: "
        f"{(seven - one) / _N:.1f} more per event, a call per field"
    )


def test_a_send_branch_is_still_accepted_and_a_wrong_item_still_named() -> None:
    """The items of a list[Branch] that the quick test does not accept (a Send
    branch, a dict) go through the full check, which accepts a good one and
    names the field of a bad one."""
    good = Event("run", 1, StepCompleted("s", 0, 0, {}, ["a", {"step": "b", "input": 1}]))
    (row,) = event_rows([good], 0, None)
    assert event_from_row("run", row[1:], "test", None) == good
    bad = pack({"step": "s", "superstep": 0, "branch": 0, "writes": {}, "goto": ["a", 7]})
    columns = ("run", 1, "StepCompleted", row[3], row[4], 0)
    stored = (*columns[1:], bad, row_checksum(*columns, bad))
    with pytest.raises(CorruptEventError, match="goto") as caught:
        event_from_row("run", stored, "test", None)
    assert (caught.value.run_id, caught.value.seq) == ("run", 1)


async def test_a_read_decodes_a_batch_with_few_python_calls_per_event(tmp_path: Path) -> None:
    """Reading a SQLite run decodes each batch at once (issue 23 item 8: the
    fold of 1M events was bound by Python steps per event): a read of 200
    events makes at most three Python calls per event (building its payload,
    building the event, handing it to the reader), where decoding one by one
    made ten and a half."""
    log = SqliteEventLog(tmp_path / "log.db")
    try:
        events = [Event("run", seq, _SEVEN, writer_epoch=0) for seq in range(1, 201)]
        await log.append(events)
        read: list[Event] = []

        async def read_all() -> None:
            async for event in log.read("run"):
                read.append(event)

        await read_all()  # the first read opens what it keeps
        read.clear()
        calls = await _python_calls_async(read_all)
        assert read == events
        assert calls / len(events) <= 3.5, f"{calls / len(events):.1f} Python calls per event"
    finally:
        await log.close()


async def _python_calls_async(read: Callable[[], Awaitable[None]]) -> int:
    """How many Python functions run on this thread while ``read`` is awaited."""
    with _counting_calls() as count:
        await read()
    return count[0]
