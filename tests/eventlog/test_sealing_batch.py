"""Sealing one append's events as a batch: one key lookup per run, a nonce per event.

An append seals every event of its run under one data key, so the key is
looked up (or made) once per batch, not once per event; each event still
gets a random nonce of its own and binds its own seq, type and metadata.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from agentlog.crypto import DataKey, DataKeyCache, LocalKeyStore, PayloadCipher
from agentlog.crypto._aead import PayloadBinding, open_, read_header
from agentlog.errors import TamperedPayloadError
from agentlog.eventlog._sealing import SEALED_KEY
from agentlog.eventlog.codec import decode_stored_payload, encode_stored_payload, pack, unpack
from agentlog.eventlog.events import Event, StepCompleted, TaskCompleted, WriterClaimed
from agentlog.eventlog.sqlite._log import SqliteEventLog

_NONCE = 12


class CountingCache(DataKeyCache):
    """The real cache on a real keyring, counting the keys asked for to seal."""

    def __init__(self, path: Path) -> None:
        super().__init__(LocalKeyStore(path))
        self.for_seal_calls = 0

    def for_seal(self, run_id: str, seq: int = 0) -> DataKey:
        self.for_seal_calls += 1
        return super().for_seal(run_id, seq)


def _events(run_id: str, first: int, count: int) -> list[Event]:
    return [
        Event(run_id, seq, TaskCompleted(f"key-{seq}", {"text": f"secret {seq}"}), writer_epoch=1)
        for seq in range(first, first + count)
    ]


def _append_raw(folder: Path, cipher: PayloadCipher, events: list[Event]) -> list[bytes]:
    """Append ``events`` in one batch to a real SQLite log; their payloads as stored."""

    async def scenario() -> None:
        async with SqliteEventLog(str(folder / "log.db"), cipher=cipher) as log:
            epoch = await log.claim_writer("run")
            await log.append([Event(e.run_id, e.seq, e.data, writer_epoch=epoch) for e in events])

    asyncio.run(scenario())
    with sqlite3.connect(folder / "log.db") as db:
        rows = db.execute("SELECT payload FROM events WHERE run_id = 'run' ORDER BY seq").fetchall()
    return [bytes(row[0]) for row in rows]


def _nonce(payload: bytes, run_id: str, seq: int) -> bytes:
    blob = unpack(payload)[SEALED_KEY]
    header = read_header(blob, PayloadBinding(run_id, seq, "event"))
    return bytes(blob[header.length : header.length + _NONCE])


def test_an_append_asks_for_the_run_key_once_and_reads_back_whole(tmp_path: Path) -> None:
    cache = CountingCache(tmp_path / "keyring.json")

    async def scenario() -> list[Event]:
        async with SqliteEventLog(str(tmp_path / "log.db"), cipher=PayloadCipher(cache)) as log:
            epoch = await log.claim_writer("run")
            events = [
                Event("run", e.seq, e.data, writer_epoch=epoch) for e in _events("run", 1, 40)
            ]
            await log.append(events)
            return [event async for event in log.read("run")]

    read = asyncio.run(scenario())
    assert cache.for_seal_calls == 1, f"{cache.for_seal_calls} key lookups for one append"
    assert [e.data for e in read] == [e.data for e in _events("run", 1, 40)]
    assert all(e.sealed is not None and e.unreadable is None for e in read)


def test_every_event_of_a_batch_has_its_own_nonce(tmp_path: Path) -> None:
    cipher = PayloadCipher(LocalKeyStore(tmp_path / "keyring.json"))
    payloads = _append_raw(tmp_path, cipher, _events("run", 1, 200))
    nonces = {_nonce(payload, "run", seq) for seq, payload in enumerate(payloads, start=1)}
    assert len(nonces) == 200


def test_a_batch_payload_is_bound_to_its_own_seq_and_metadata(tmp_path: Path) -> None:
    cipher = PayloadCipher(LocalKeyStore(tmp_path / "keyring.json"))
    first, second = _append_raw(tmp_path, cipher, _events("run", 1, 2))
    moved = dict(unpack(first))
    moved[SEALED_KEY] = unpack(second)[SEALED_KEY]  # event 2's content under event 1
    with pytest.raises(TamperedPayloadError):
        decode_stored_payload("TaskCompleted", 1, pack(moved), cipher, run_id="run", seq=1)
    edited = dict(unpack(first))
    edited["key"] = "another-key"
    with pytest.raises(TamperedPayloadError):
        decode_stored_payload("TaskCompleted", 1, pack(edited), cipher, run_id="run", seq=1)


def test_a_batch_stores_what_one_event_at_a_time_stores(tmp_path: Path) -> None:
    cipher = PayloadCipher(LocalKeyStore(tmp_path / "keyring.json"))
    events = [
        *_events("run", 1, 2),
        Event("run", 3, WriterClaimed(2)),  # metadata only: stays in clear
        Event("run", 4, StepCompleted("s", 1, 0, {"n": 1})),
    ]
    from agentlog.eventlog._row_format import event_rows

    batch = [row[6] for row in event_rows(events, 1, cipher)]
    for event, payload in zip(events, batch, strict=True):
        alone = unpack(encode_stored_payload(event, cipher))
        stored = unpack(payload)
        assert stored.keys() == alone.keys()
        assert {k: v for k, v in stored.items() if k != SEALED_KEY} == {
            k: v for k, v in alone.items() if k != SEALED_KEY
        }


def test_a_sealer_past_its_count_draws_fresh_nonces(tmp_path: Path) -> None:
    from agentlog.crypto._aead import BatchSealer

    key = DataKeyCache(LocalKeyStore(tmp_path / "keyring.json")).for_seal("run", 1)
    sealer = BatchSealer(key, "event", 2)
    blobs = [b"".join(sealer.seal_parts(seq, b"payload %d" % seq)) for seq in range(1, 6)]
    nonces = set()
    for seq, blob in enumerate(blobs, start=1):
        binding = PayloadBinding("run", seq, "event")
        assert open_(key, blob, binding) == b"payload %d" % seq
        header = read_header(blob, binding)
        nonces.add(blob[header.length : header.length + _NONCE])
    assert len(nonces) == 5


def test_an_unserializable_content_in_a_sealed_batch_names_its_path(tmp_path: Path) -> None:
    from agentlog.errors import NotSerializableError
    from agentlog.eventlog.codec import encode_stored_payloads

    cipher = PayloadCipher(LocalKeyStore(tmp_path / "keyring.json"))
    events = [*_events("run", 1, 2), Event("run", 3, TaskCompleted("k", {"bad": object()}))]
    with pytest.raises(NotSerializableError) as caught:
        encode_stored_payloads(events, cipher)
    assert "bad" in str(caught.value) and "object" in str(caught.value)
