"""What encoding a Kafka record costs, counted (issue 23 item 10), never timed.

``encode_event`` used to pack an event's envelope through the codec's generic
Packer, whose ``default`` hook is a Python call for the timestamp, then pack
the ``[body, checksum]`` frame through it again. The head and the frame now go
through a Packer that packs a UTC timestamp in C, so the generic Packer sees
only the payload, and nothing at all when the writer already packed it
(``Event.packed``). Counted: the values given to the generic Packer. The bytes
are the same (``tests/property/test_codec_laws.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from agentlog.eventlog import _packing
from agentlog.eventlog.codec import decode_event, encode_event, pack
from agentlog.eventlog.events import Event, StepCompleted


class _Counting:
    def __init__(self, real: Any, packed: list[Any]) -> None:
        self.real, self.packed = real, packed

    def pack(self, value: Any) -> bytes:
        self.packed.append(value)
        raw: bytes = self.real.pack(value)
        return raw


@contextlib.contextmanager
def _generic_packs() -> Iterator[list[Any]]:
    packed: list[Any] = []
    real = _packing._packer()
    _packing._PACKERS.packer = _Counting(real, packed)
    try:
        yield packed
    finally:
        _packing._PACKERS.packer = real


def _event(ts: datetime) -> Event:
    return Event("r", 3, StepCompleted("plan", 1, 0, {"n": 1, "at": ts}), ts=ts, writer_epoch=2)


def test_an_event_the_writer_packed_is_framed_without_the_generic_packer() -> None:
    event = _event(datetime(2026, 12, 4, 23, 0, 1, 250, tzinfo=UTC))
    object.__setattr__(event, "packed", pack(event.data.to_dict()))  # as RunWriter.emit does
    with _generic_packs() as packed:
        raw = encode_event(event)
    assert packed == []
    assert decode_event(raw) == event


def test_an_event_not_yet_packed_packs_only_its_payload_generically() -> None:
    event = _event(datetime(2026, 12, 4, 23, 0, 1, 250, tzinfo=UTC))
    with _generic_packs() as packed:
        raw = encode_event(event)
    assert packed == [event.data.to_dict()]
    assert decode_event(raw) == event


def test_a_timestamp_in_another_zone_still_takes_the_generic_packer() -> None:
    ts = datetime(2026, 12, 4, 18, 0, 1, tzinfo=timezone(timedelta(hours=-5)))
    event = _event(ts)
    with _generic_packs() as packed:
        raw = encode_event(event)
    assert len(packed) == 2  # the head (its timestamp through ``default``), the payload
    back = decode_event(raw)
    assert back == event and back.ts.tzinfo == UTC
