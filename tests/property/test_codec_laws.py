"""Laws of the codec, checked on generated values.

* decode(encode(x)) == x for every builtin value the codec documents;
* every event type round-trips, as a payload and as a whole envelope;
* an envelope's bytes are the generic packer's, whichever path encoded it
  (a UTC timestamp packed in C, a payload the writer packed once);
* arbitrary bytes either decode or raise CorruptEventError, nothing else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import typing
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.errors import CorruptEventError
from agentlog.eventlog.codec import (
    checksum,
    decode_event,
    decode_payload,
    encode_event,
    encode_payload,
    pack,
    unpack,
)
from agentlog.eventlog.events import EVENT_TYPES, SCHEMA_V, Event, EventData

FAST = settings(max_examples=60, deadline=None)

zones = st.builds(
    timezone, st.timedeltas(min_value=timedelta(hours=-23), max_value=timedelta(hours=23))
)
aware_datetimes = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=zones
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=20)
    | aware_datetimes
    | st.uuids()
    | st.decimals(allow_nan=False, allow_infinity=False)
)
keys = (
    st.text(max_size=10)
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.binary(max_size=5)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)


def _field_strategy(hint: Any) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(hint)
    if hint is str:
        return st.text(max_size=12)
    if hint is int:
        return st.integers(min_value=-(2**31), max_value=2**31)
    if hint is float:
        return st.floats(allow_nan=False)
    if hint is bool:
        return st.booleans()
    if origin is list:
        return st.lists(st.text(max_size=8), max_size=3)
    if origin is dict:
        return st.dictionaries(st.text(max_size=8), values, max_size=3)
    return values  # Any


def payloads(cls: type[EventData]) -> st.SearchStrategy[EventData]:
    hints = typing.get_type_hints(cls)
    fields = {
        f.name: _field_strategy(hints[f.name])
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]
    }
    return st.builds(cls, **fields)


any_payload = st.sampled_from(sorted(EVENT_TYPES)).flatmap(lambda name: payloads(EVENT_TYPES[name]))
events = st.builds(
    Event,
    run_id=st.text(min_size=1, max_size=12),
    seq=st.integers(min_value=1, max_value=2**62),
    data=any_payload,
    ts=aware_datetimes,
    writer_epoch=st.integers(min_value=0, max_value=2**31),
)


@FAST
@given(values)
def test_builtin_values_round_trip(value: Any) -> None:
    assert unpack(pack(value)) == value


@FAST
@given(aware_datetimes)
def test_datetimes_read_back_as_the_same_instant_in_utc(moment: datetime) -> None:
    back = unpack(pack(moment))
    assert back == moment
    assert back.tzinfo == UTC


@FAST
@given(any_payload)
def test_every_event_type_round_trips(data: EventData) -> None:
    assert decode_payload(data.type, SCHEMA_V, encode_payload(data)) == data


@FAST
@given(events)
def test_envelope_round_trips(event: Event) -> None:
    back = decode_event(encode_event(event))
    assert back == event
    assert back.ts.tzinfo == UTC


@FAST
@given(events, st.booleans(), st.booleans())
def test_envelope_bytes_are_the_generic_packers(event: Event, in_utc: bool, packed: bool) -> None:
    if in_utc:
        event = dataclasses.replace(event, ts=event.ts.astimezone(UTC))
    if packed:  # as RunWriter.emit leaves it
        object.__setattr__(event, "packed", pack(event.data.to_dict()))
    head = [event.run_id, event.seq, event.type, event.ts, event.schema_v, event.writer_epoch]
    body = pack([*head, event.data.to_dict()])
    assert encode_event(event) == pack([body, checksum(body)])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_are_corrupt(raw: bytes) -> None:
    for decode in (
        lambda: decode_event(raw),
        lambda: decode_payload("TaskCompleted", SCHEMA_V, raw, run_id="r", seq=1),
        lambda: decode_payload("RunStarted", SCHEMA_V, raw, run_id="r", seq=1),
    ):
        with contextlib.suppress(CorruptEventError):
            decode()


@FAST
@given(events, st.data())
def test_mangled_envelopes_decode_or_are_corrupt(event: Event, data: st.DataObject) -> None:
    raw = bytearray(encode_event(event))
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(raw) - 1))
        raw[index] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    with contextlib.suppress(CorruptEventError):
        decode_event(bytes(raw[:cut]))
