"""Events sealed by envelope version 1 must keep opening to the committed state.

Never regenerated here: ``sealed_v1_run.jsonl`` holds the Kafka envelopes of
one run written encrypted by the agentlog of envelope version 1 (its
associated data did not bind the clear metadata, and its keyring entry
records no ``from`` seq), ``sealed_v1_keyring.json`` the keyring that
sealed it, ``sealed_v1_expected.json`` the state it folds to and a snapshot
blob of that version. See ``make_sealed_golden.py``.
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentlog.crypto import LocalKeyStore, PayloadCipher, read_header
from agentlog.crypto._aead import PayloadBinding
from agentlog.errors import TamperedPayloadError
from agentlog.eventlog._sealing import open_blob
from agentlog.eventlog.codec import decode_event, encode_event, unpack
from agentlog.eventlog.events import Event
from agentlog.projector import fold

HERE = Path(__file__).parent
RUN = "sealed-main"


@pytest.fixture
def cipher(tmp_path: Path) -> PayloadCipher:
    path = tmp_path / "keyring.json"
    shutil.copyfile(HERE / "sealed_v1_keyring.json", path)
    path.chmod(0o600)
    return PayloadCipher(LocalKeyStore(path))


def _raw() -> list[bytes]:
    lines = (HERE / "sealed_v1_run.jsonl").read_text().splitlines()
    return [base64.b64decode(json.loads(line)["event"]) for line in lines]


def _expected() -> dict[str, Any]:
    return json.loads((HERE / "sealed_v1_expected.json").read_text())  # type: ignore[no-any-return]


def test_version_1_events_open_and_fold_to_the_committed_state(cipher: PayloadCipher) -> None:
    events = [decode_event(raw, cipher=cipher) for raw in _raw()]
    sealed = [e for e in events if e.sealed is not None]
    assert len(sealed) >= 10 and all(e.unreadable is None for e in events)
    assert {read_header(e.sealed, PayloadBinding(RUN, e.seq, "event")).version for e in sealed} == {
        1
    }
    state = fold(events)
    assert json.loads(json.dumps(state.to_dict(), sort_keys=True)) == _expected()["state"]
    assert state.values["sent"] == "msg-0001" and state.values["reviewer"] == "ops"


def test_a_version_1_snapshot_opens(cipher: PayloadCipher) -> None:
    expected = _expected()
    blob = base64.b64decode(expected["snapshot"])
    values = unpack(open_blob(cipher, RUN, expected["state"]["seq"], "snapshot", blob))
    assert json.loads(json.dumps(values, sort_keys=True)) == expected["state"]["values"]


def test_a_key_that_records_no_from_seq_refuses_clear_content_at_every_seq(
    cipher: PayloadCipher,
) -> None:
    """The committed keyring predates ``from``: the whole run must be sealed."""
    opened = [decode_event(raw, cipher=cipher) for raw in _raw()]
    first = next(e for e in opened if e.sealed is not None)
    clear = encode_event(Event(RUN, first.seq, first.data, first.ts, first.writer_epoch))
    with pytest.raises(TamperedPayloadError, match=rf"run '{RUN}' seq {first.seq}.*in clear"):
        decode_event(clear, cipher=cipher)
