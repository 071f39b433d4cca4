"""The msgpack codec: its documented encodings, its refusals, its upcaster chain."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgpack
import pytest

from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.errors import CorruptEventError, NotSerializableError, UnknownEventTypeError
from agentlog.eventlog import codec
from agentlog.eventlog._packing import pack_each, pack_pair
from agentlog.eventlog._sealing import stored_payloads
from agentlog.eventlog.codec import (
    decode_event,
    decode_payload,
    encode_event,
    encode_payload,
    pack,
    unpack,
)
from agentlog.eventlog.events import SCHEMA_V, Event, TaskCompleted, WriterClaimed


def plain(raw: bytes) -> Any:
    """Decode with bare msgpack, to see exactly what was stored."""
    return msgpack.unpackb(raw, raw=False, strict_map_key=False)


def test_builtin_values_are_native_msgpack() -> None:
    value = {"n": None, "b": True, "i": -3, "f": 1.5, "s": "é", "by": b"\x00", "l": [1, [2]]}
    assert plain(pack(value)) == value
    assert pack(value) == msgpack.packb(value, use_bin_type=True)


def test_tuple_reads_back_as_list_and_int_keys_survive() -> None:
    assert unpack(pack((1, (2, 3)))) == [1, [2, 3]]
    assert unpack(pack({1: "a", b"k": "b"})) == {1: "a", b"k": "b"}


def test_aware_datetime_is_the_timestamp_extension_and_reads_back_utc() -> None:
    moment = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=timezone(timedelta(hours=2)))
    stored = plain(pack(moment))
    assert isinstance(stored, msgpack.Timestamp)
    assert stored.to_datetime() == moment
    back = unpack(pack(moment))
    assert back == moment
    assert back.utcoffset() == timedelta(0)
    assert back.hour == 3


def test_datetime_before_1970_keeps_its_microseconds() -> None:
    moment = datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC)
    assert unpack(pack(moment)) == moment


def test_uuid_is_extension_1_with_its_16_bytes() -> None:
    value = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert plain(pack(value)) == msgpack.ExtType(1, value.bytes)
    assert unpack(pack(value)) == value


def test_decimal_is_extension_2_with_its_ascii_string() -> None:
    value = Decimal("-12.3400")
    assert plain(pack(value)) == msgpack.ExtType(2, b"-12.3400")
    back = unpack(pack(value))
    assert back == value and str(back) == "-12.3400"


def test_naive_datetime_is_refused_with_its_path() -> None:
    with pytest.raises(NotSerializableError) as caught:
        pack({"a": [1, datetime(2026, 1, 1)]})
    assert caught.value.path == "value['a'][1]"
    assert caught.value.value_type == "naive datetime"


@pytest.mark.parametrize(
    ("value", "path", "kind"),
    [
        ({"s": {1, 2}}, "value['s']", "set"),
        ([object()], "value[0]", "object"),
        ({"x": {"y": frozenset()}}, "value['x']['y']", "frozenset"),
        ({frozenset(): "frozenset key"}, "value key frozenset()", "frozenset"),
    ],
)
def test_unsupported_values_are_refused_with_their_path(value: Any, path: str, kind: str) -> None:
    with pytest.raises(NotSerializableError) as caught:
        pack(value)
    assert (caught.value.path, caught.value.value_type) == (path, kind)
    assert "Convert it" in str(caught.value)


def _sealer(tmp_path: Path) -> PayloadCipher:
    return PayloadCipher(LocalKeyStore(tmp_path / "keyring.json"))


_VIEW_EVENT = Event("r", 1, TaskCompleted("k", {"a": memoryview(b"abcdef")[::2]}))
_PACKINGS: dict[str, Callable[[Path], object]] = {
    "pack": lambda _: pack({"a": memoryview(b"abcdef")[::2]}),
    "pack_each": lambda _: pack_each([{}, {"a": memoryview(b"abcdef")[::2]}], ["v", "value"]),
    "pack_pair": lambda _: pack_pair({}, {"a": memoryview(b"abcdef")[::2]}),
    "encode_event": lambda _: encode_event(_VIEW_EVENT),
    "encode_event sealed": lambda tmp: encode_event(_VIEW_EVENT, _sealer(tmp)),
    "stored_payloads": lambda _: stored_payloads(None, [_VIEW_EVENT]),
    "stored_payloads sealed": lambda tmp: stored_payloads(_sealer(tmp), [_VIEW_EVENT]),
}


@pytest.mark.parametrize("packing", sorted(_PACKINGS))
def test_a_strided_memoryview_is_refused_naming_its_path(packing: str, tmp_path: Path) -> None:
    """msgpack cannot read a view that is not C-contiguous (``view[::2]``): it
    raised a bare BufferError; every packing path refuses it as any other value
    it cannot carry, and says what to pass instead."""
    with pytest.raises(NotSerializableError) as caught:
        _PACKINGS[packing](tmp_path)
    assert caught.value.path.endswith("['a']")
    assert "not C-contiguous" in caught.value.value_type
    assert "bytes(view)" in str(caught.value)


def test_a_released_memoryview_is_refused_naming_its_path() -> None:
    """Reading a released view's attributes raises ValueError: the slow path
    that names the bad part must not, so the caller gets NotSerializableError."""
    view = memoryview(b"abc")
    view.release()
    with pytest.raises(NotSerializableError) as caught:
        pack({"ok": 1, "a": view})
    assert caught.value.path == "value['a']"
    assert "released memoryview" in caught.value.value_type


def test_contiguous_views_and_bytearrays_pack_as_bytes_and_are_never_blamed() -> None:
    value = {
        "v": memoryview(b"ab"),
        "m": memoryview(b"abcd").cast("B", (2, 2)),
        "y": bytearray(b"c"),
    }
    assert unpack(pack(value)) == {"v": b"ab", "m": b"abcd", "y": b"c"}
    with pytest.raises(NotSerializableError) as caught:  # the set is the bad part
        pack({**value, "s": {1}})
    assert (caught.value.path, caught.value.value_type) == ("value['s']", "set")


def test_tuple_keys_read_back_as_tuples() -> None:
    # msgpack writes a tuple key as an array; reading it must not fail.
    value = {(1, (2, "x")): "a", "n": {(3,): [4, 5]}}
    assert unpack(pack(value)) == value


def test_instant_past_year_9999_in_utc_is_refused_at_write() -> None:
    late = datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5)))
    with pytest.raises(NotSerializableError):
        pack({"when": late})


def test_payload_path_starts_with_the_event_type() -> None:
    with pytest.raises(NotSerializableError) as caught:
        encode_payload(TaskCompleted("k", {"r": {3}}))
    assert caught.value.path == "TaskCompleted['result']['r']"


def test_payload_is_a_map_of_the_fields() -> None:
    assert plain(encode_payload(WriterClaimed(3, "me"))) == {"epoch": 3, "owner": "me"}


def test_event_round_trip_and_envelope_layout() -> None:
    event = Event("r", 7, TaskCompleted("k", [1, "x"], 2.5), writer_epoch=4)
    raw = encode_event(event)
    body, stored = plain(raw)
    assert stored == codec.checksum(body)
    run_id, seq, event_type, ts, schema_v, epoch, fields = plain(body)
    assert (run_id, seq, event_type, schema_v, epoch) == ("r", 7, "TaskCompleted", SCHEMA_V, 4)
    assert ts.to_datetime() == event.ts
    assert fields == {"key": "k", "result": [1, "x"], "duration_ms": 2.5}
    assert decode_event(raw) == event


def test_unknown_extension_type_is_corrupt() -> None:
    raw = msgpack.packb({"key": "k", "result": msgpack.ExtType(9, b"x")}, use_bin_type=True)
    with pytest.raises(CorruptEventError) as caught:
        decode_payload("TaskCompleted", SCHEMA_V, raw, run_id="r", seq=5)
    assert (caught.value.run_id, caught.value.seq) == ("r", 5)
    assert "extension type 9" in caught.value.reason


def test_class_path_in_stored_bytes_is_never_imported() -> None:
    raw = msgpack.packb({"epoch": 1}, use_bin_type=True)
    with pytest.raises(UnknownEventTypeError) as caught:
        decode_payload("os.system", SCHEMA_V, raw, run_id="r", seq=1)
    assert "os.system" in str(caught.value)


@pytest.mark.parametrize(
    "raw", [b"", b"\xc1", b"\x93\x01", msgpack.packb([1, 2, 3]), msgpack.packb({"nope": 1})]
)
def test_bad_payload_bytes_are_corrupt(raw: bytes) -> None:
    with pytest.raises(CorruptEventError):
        decode_payload("TaskCompleted", SCHEMA_V, raw, run_id="r", seq=1)


@pytest.mark.parametrize("schema_v", [0, -1, SCHEMA_V + 1])
def test_schema_version_outside_the_known_range_is_corrupt(schema_v: int) -> None:
    raw = encode_payload(WriterClaimed(1))
    with pytest.raises(CorruptEventError, match="schema version"):
        decode_payload("WriterClaimed", schema_v, raw, run_id="r", seq=1)


def test_upcasters_run_in_order_up_to_the_current_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[int, str]] = []

    def v1_to_v2(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
        calls.append((1, event_type))
        return {"key": payload["id"], "res": payload["out"]}

    def v2_to_v3(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
        calls.append((2, event_type))
        return {"key": payload["key"], "result": payload["res"], "duration_ms": 1.0}

    monkeypatch.setattr(codec, "SCHEMA_V", 3)
    monkeypatch.setitem(codec.UPCASTERS, 1, v1_to_v2)
    monkeypatch.setitem(codec.UPCASTERS, 2, v2_to_v3)
    old = pack({"id": "k", "out": 42})
    assert decode_payload("TaskCompleted", 1, old) == TaskCompleted("k", 42, 1.0)
    assert calls == [(1, "TaskCompleted"), (2, "TaskCompleted")]
    calls.clear()
    middle = pack({"key": "k", "res": 7})
    assert decode_payload("TaskCompleted", 2, middle) == TaskCompleted("k", 7, 1.0)
    assert calls == [(2, "TaskCompleted")]
    calls.clear()
    current = pack({"key": "k", "result": 1})
    assert decode_payload("TaskCompleted", 3, current) == TaskCompleted("k", 1)
    assert calls == []


def test_envelope_without_a_checksum_still_decodes() -> None:
    """Envelopes written before checksums (the golden v1 log) read, unverified."""
    event = Event("r", 3, WriterClaimed(2, "me"), writer_epoch=2)
    body, _ = plain(encode_event(event))
    assert decode_event(body) == event


def test_one_flipped_byte_anywhere_in_an_event_is_a_typed_error() -> None:
    event = Event("run-7", 9, TaskCompleted("k", "MARKER-final", 1.5), writer_epoch=1)
    raw = encode_event(event)
    for i in range(len(raw)):
        for bit in (0x01, 0x20):
            damaged = bytearray(raw)
            damaged[i] ^= bit
            with pytest.raises(CorruptEventError) as caught:
                decode_event(bytes(damaged), where="test")
            assert caught.value.reason
    flipped = raw.replace(b"MARKER", b"NARKER")
    assert flipped != raw
    with pytest.raises(CorruptEventError, match="checksum") as caught:
        decode_event(flipped)
    assert (caught.value.run_id, caught.value.seq) == ("run-7", 9)


@pytest.mark.parametrize(
    ("event_type", "fields", "bad"),
    [
        ("StepCompleted", {"step": "a", "superstep": 0, "branch": 0, "writes": [1]}, "writes"),
        ("StepCompleted", {"step": "a", "superstep": "0", "branch": 0, "writes": {}}, "superstep"),
        ("SuperstepCommitted", {"superstep": 0, "next": "b"}, "next"),
        (
            "RunStarted",
            {"workflow": 1, "version": "1", "input": {}, "durability": "sync", "fingerprint": "f"},
            "workflow",
        ),
        ("TaskCompleted", {"key": "k", "result": 1, "duration_ms": "slow"}, "duration_ms"),
    ],
)
def test_payload_of_the_wrong_shape_is_corrupt_naming_run_and_seq(
    event_type: str, fields: dict[str, Any], bad: str
) -> None:
    with pytest.raises(CorruptEventError) as caught:
        decode_payload(event_type, SCHEMA_V, pack(fields), run_id="r", seq=4)
    assert (caught.value.run_id, caught.value.seq) == ("r", 4)
    assert bad in caught.value.reason
