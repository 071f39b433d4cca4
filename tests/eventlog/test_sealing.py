"""The log's side of encryption: which fields are sealed, and how they read back.

Content fields (inputs, results, writes, errors...) are sealed with the
run's data key; metadata (types, seqs, steps, task names) stays in clear. A
reader without the key gets the metadata and an ``unreadable`` reason that
folding raises; a moved or altered blob raises at once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.errors import KeyStoreMissingError, ShreddedError, TamperedPayloadError
from agentlog.eventlog._base import Command
from agentlog.eventlog._sealing import SEALED_KEY
from agentlog.eventlog.codec import (
    decode_event,
    decode_stored_payload,
    encode_event,
    encode_stored_payload,
    unpack,
)
from agentlog.eventlog.events import (
    Event,
    ResumeReceived,
    RunFailed,
    RunStarted,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
    WriterClaimed,
)
from agentlog.eventlog.kafka._commands import decode_command, encode_command
from agentlog.projector._fold import apply
from agentlog.projector._state import RunState

CANARY = "canary-5be1d"


@pytest.fixture
def cipher(tmp_path: Path) -> PayloadCipher:
    return PayloadCipher(LocalKeyStore(tmp_path / "keyring.json"))


def _completed(seq: int = 3) -> Event:
    return Event("r", seq, TaskCompleted("k1", {"text": CANARY}, 12.5), writer_epoch=1)


def test_content_is_sealed_and_metadata_stays_clear(cipher: PayloadCipher) -> None:
    raw = encode_stored_payload(_completed(), cipher)
    assert CANARY.encode() not in raw
    stored = unpack(raw)
    assert stored["key"] == "k1" and stored["duration_ms"] == 12.5  # metadata in clear
    assert "result" not in stored and isinstance(stored[SEALED_KEY], bytes)
    data, sealed, unreadable = decode_stored_payload(
        "TaskCompleted", 1, raw, cipher, run_id="r", seq=3
    )
    assert data == _completed().data and sealed == stored[SEALED_KEY] and unreadable is None


def test_an_event_without_content_is_stored_as_it_is(cipher: PayloadCipher) -> None:
    event = Event("r", 2, TaskStarted("k1", "model", "plan", 0, 0, 0, 1))
    assert SEALED_KEY not in unpack(encode_stored_payload(event, cipher))


def test_without_the_key_the_metadata_reads_and_folding_raises(cipher: PayloadCipher) -> None:
    started = RunStarted("wf", "1", {"topic": CANARY}, "sync", "f", {}, ["a"], {})
    raw = encode_event(Event("r", 1, started), cipher)
    event = decode_event(raw)  # no key store here
    assert isinstance(event.unreadable, KeyStoreMissingError)
    assert event.data.workflow == "wf" and event.data.input is None
    with pytest.raises(KeyStoreMissingError):
        apply(RunState(), event)
    assert decode_event(raw, cipher=cipher).data == started


def test_a_blob_moved_to_another_seq_or_type_is_tampering(cipher: PayloadCipher) -> None:
    stored = unpack(encode_stored_payload(_completed(seq=3), cipher))
    moved = encode_stored_payload(
        Event("r", 4, ResumeReceived(None, {}), sealed=stored[SEALED_KEY]), None
    )
    with pytest.raises(TamperedPayloadError, match="seq 4"):
        decode_stored_payload("ResumeReceived", 1, moved, cipher, run_id="r", seq=4)
    same_seq_other_type = encode_stored_payload(
        Event("r", 3, ResumeReceived(None, {}), sealed=stored[SEALED_KEY]), None
    )
    with pytest.raises(TamperedPayloadError):
        decode_stored_payload("ResumeReceived", 1, same_seq_other_type, cipher, run_id="r", seq=3)


def test_a_read_event_is_stored_again_with_its_ciphertext_and_no_key(
    cipher: PayloadCipher,
) -> None:
    first = decode_event(encode_event(_completed(), cipher))  # read without the key
    copied = encode_event(first)  # an archive copy: no cipher at hand
    assert CANARY.encode() not in copied
    assert decode_event(copied, cipher=cipher).data == _completed().data


def test_a_shredded_run_reads_as_metadata(cipher: PayloadCipher) -> None:
    raw = encode_event(_completed(), cipher)
    cipher.shred("r")
    event = decode_event(raw, cipher=cipher)
    assert isinstance(event.unreadable, ShreddedError)
    assert event.data.key == "k1" and event.data.result is None
    claim = decode_event(encode_event(Event("r", 4, WriterClaimed(2, "w")), cipher), cipher=cipher)
    assert claim.unreadable is None  # metadata-only events need no key


def test_a_command_is_sealed_and_must_be_read_whole(cipher: PayloadCipher) -> None:
    command = Command("r", "resume", ResumeReceived(None, {"2:0:0": CANARY}))
    raw = encode_command(command, cipher)
    assert CANARY.encode() not in raw
    assert decode_command(raw, (0, 7), "here", cipher).data == command.data
    with pytest.raises(KeyStoreMissingError):
        decode_command(raw, (0, 7), "here")


def test_a_stored_payload_is_exactly_the_msgpack_of_its_stored_fields(
    cipher: PayloadCipher,
) -> None:
    """The append path builds the bytes from the metadata the seal bound; they
    must equal what msgpack writes for the same fields, for every event type."""
    from agentlog.eventlog.codec import pack, store_fields
    from agentlog.testing._events import every_event_type

    for event in every_event_type("r"):
        raw = encode_stored_payload(event, cipher)
        stored = unpack(raw)
        fields = event.data.to_dict()
        again = store_fields(
            None, fields, event.run_id, event.seq, event.type, sealed=stored.get(SEALED_KEY)
        )
        assert raw == pack(again if SEALED_KEY in stored else fields), event.type


@pytest.mark.parametrize(
    "data",
    [
        RunFailed("step failed", failure={"type": "m.Declined", "message": CANARY}),
        TaskFailed("k1", "Declined", failure={"type": "m.Declined", "message": CANARY}),
    ],
    ids=["RunFailed", "TaskFailed"],
)
def test_a_recorded_failure_is_sealed(cipher: PayloadCipher, data: RunFailed | TaskFailed) -> None:
    """A failure's message and causes are content: what the run was given may be in them."""
    raw = encode_stored_payload(Event("r", 4, data, writer_epoch=1), cipher)
    assert CANARY.encode() not in raw
    assert "failure" not in unpack(raw)
    decoded, _, _ = decode_stored_payload(data.type, 1, raw, cipher, run_id="r", seq=4)
    assert decoded == data
