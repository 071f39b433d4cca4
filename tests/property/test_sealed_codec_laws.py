"""Sealing changes nothing a reader with the key can see.

For every generated event: the Kafka envelope (``encode_event`` /
``decode_event``) and the SQLite row codec (``event_row`` /
``event_from_row``) with a cipher give back exactly what the plain round
trip gives; and without the key the metadata still decodes, with the
content withheld, never wrong.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given

from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.errors import KeyStoreMissingError
from agentlog.eventlog._row_format import event_from_row, event_row
from agentlog.eventlog._sealing import CONTENT_FIELDS, SEALED_KEY
from agentlog.eventlog.codec import (
    decode_event,
    encode_event,
    encode_stored_payload,
    pack,
    store_fields,
    unpack,
)
from agentlog.eventlog.events import Event
from tests.property.test_codec_laws import FAST, events


@pytest.fixture(scope="module")
def cipher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PayloadCipher]:
    """One keyring for the module (each generated run id gets its key once)."""
    folder: Path = tmp_path_factory.mktemp("keys")
    yield PayloadCipher(LocalKeyStore(folder / "keyring.json"))


def _has_content(event: Event) -> bool:
    return any(name in CONTENT_FIELDS for name in event.data.to_dict())


@FAST
@given(event=events)
def test_the_sealed_envelope_round_trip_equals_the_plain_one(
    cipher: PayloadCipher, event: Event
) -> None:
    plain = decode_event(encode_event(event))
    sealed_raw = encode_event(event, cipher)
    sealed = decode_event(sealed_raw, cipher=cipher)
    assert sealed == plain and sealed.ts == plain.ts and sealed.unreadable is None
    assert (sealed.sealed is not None) == _has_content(event)
    blind = decode_event(sealed_raw)  # no key store: metadata, never wrong content
    assert (blind.run_id, blind.seq, blind.type, blind.ts) == (
        event.run_id,
        event.seq,
        event.type,
        event.ts,
    )
    if _has_content(event):
        assert isinstance(blind.unreadable, KeyStoreMissingError)
    else:
        assert blind == plain


@FAST
@given(event=events)
def test_the_sealed_sqlite_row_round_trip_equals_the_plain_one(
    cipher: PayloadCipher, event: Event
) -> None:
    epoch = event.writer_epoch
    plain = event_from_row(event.run_id, event_row(event, epoch, None)[1:], "prop", None)
    row = event_row(event, epoch, cipher)[1:]
    assert event_from_row(event.run_id, row, "prop", cipher) == plain
    blind = event_from_row(event.run_id, row, "prop", None)
    assert blind.type == plain.type and blind.seq == plain.seq
    assert (blind.unreadable is not None) == _has_content(event)


@FAST
@given(event=events)
def test_a_stored_payload_is_the_msgpack_of_its_stored_fields(
    cipher: PayloadCipher, event: Event
) -> None:
    """The append path writes the map header itself; msgpack must agree byte for byte."""
    for key_store in (None, cipher):
        raw = encode_stored_payload(event, key_store)
        blob = unpack(raw).get(SEALED_KEY)
        fields = event.data.to_dict()
        stored = store_fields(None, fields, event.run_id, event.seq, event.type, sealed=blob)
        assert raw == pack(stored)
