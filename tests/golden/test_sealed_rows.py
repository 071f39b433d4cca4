"""Sealed rows written before the batched row writer changed keep reading, and
the rows it writes now are the same rows but for each payload's fresh nonce.

Never regenerated here: ``sealed_rows_s31.json`` holds one batch of SQLite
event rows written with a cipher by the row writer of session 31,
``sealed_rows_s31_keyring.json`` the keyring that sealed them (see
``make_sealed_rows.py``). Issue 23, item 9: the writer now reads payload
fields through compiled readers, packs them with ormsgpack and frames the
sealed blob in one pass; the stored format must not move.
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.crypto._aead import envelope_version
from agentlog.eventlog._row_format import event_from_row, event_rows
from agentlog.eventlog._sealing import SEALED_KEY
from agentlog.eventlog.codec import pack, row_checksum, unpack
from tests.golden.make_sealed_rows import EPOCH, RUN, events

HERE = Path(__file__).parent


@pytest.fixture
def cipher(tmp_path: Path) -> PayloadCipher:
    path = tmp_path / "keyring.json"
    shutil.copyfile(HERE / "sealed_rows_s31_keyring.json", path)
    path.chmod(0o600)
    return PayloadCipher(LocalKeyStore(path))


def _stored() -> list[tuple[Any, ...]]:
    rows = json.loads((HERE / "sealed_rows_s31.json").read_text())
    return [(*row[:5], base64.b64decode(row[5]), row[6]) for row in rows]


def _opened(cipher: PayloadCipher, seq: int, event_type: str, payload: bytes) -> tuple[Any, ...]:
    """A stored payload as the reader takes it apart: its clear map, and its sealed
    blob's envelope version and plaintext (None, None for a clear payload)."""
    fields = unpack(payload)
    blob = fields.pop(SEALED_KEY, None)
    if blob is None:
        return fields, None, None
    plain = cipher.open(RUN, seq, "event", blob, event_type.encode(), pack(fields))
    return fields, envelope_version(blob), plain


def test_rows_stored_by_the_old_writer_read_back(cipher: PayloadCipher) -> None:
    stored = _stored()
    read = [event_from_row(RUN, row, "golden", cipher) for row in stored]
    assert [(e.seq, e.data, e.ts, e.writer_epoch) for e in read] == [
        (e.seq, e.data, e.ts, e.writer_epoch) for e in events()
    ]
    sealed = [e.type for e in read if e.sealed is not None]
    assert "WriterClaimed" not in sealed and "TaskCompleted" in sealed
    assert envelope_version(read[4].sealed or b"") == 3  # a Send input, sealed


def test_the_new_writer_writes_the_old_rows_but_for_the_nonces(cipher: PayloadCipher) -> None:
    stored = _stored()
    new = event_rows(events(), EPOCH, cipher)
    for old_row, new_row in zip(stored, new, strict=True):
        seq, event_type = old_row[0], old_row[1]
        assert new_row[:6] == (RUN, *old_row[:5])  # the envelope columns
        assert new_row[7] == row_checksum(*new_row[:7])
        old_payload, new_payload = old_row[5], new_row[6]
        assert len(new_payload) == len(old_payload)
        assert _opened(cipher, seq, event_type, new_payload) == _opened(
            cipher, seq, event_type, old_payload
        )
        if SEALED_KEY not in unpack(old_payload):
            assert new_payload == old_payload  # a clear payload: the very bytes
        assert event_from_row(RUN, new_row[1:], "new", cipher).data == events()[seq - 1].data
