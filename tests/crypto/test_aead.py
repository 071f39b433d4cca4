"""AES-256-GCM sealing of one payload: round trips, bindings, tampering, the header."""

from __future__ import annotations

import os

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentlog.crypto import DataKey, PayloadBinding, is_sealed, open_, read_header, seal
from agentlog.crypto._aead import MAGIC
from agentlog.errors import (
    CorruptEventError,
    EncryptionError,
    TamperedPayloadError,
    WrongKeyError,
)


def _key(run_id: str = "run-1", data_key_id: str = "dk-1") -> DataKey:
    return DataKey(run_id, data_key_id, "local-1", os.urandom(32))


KEY = _key()
AT = PayloadBinding("run-1", 7, "event")


@given(
    plaintext=st.binary(max_size=4096),
    run_id=st.text(max_size=40),
    seq=st.integers(min_value=0, max_value=2**63 - 1),
    kind=st.sampled_from(["event", "snapshot"]),
    extra=st.binary(max_size=32),
)
def test_open_of_seal_is_identity(
    plaintext: bytes, run_id: str, seq: int, kind: str, extra: bytes
) -> None:
    binding = PayloadBinding(run_id, seq, kind, extra)  # type: ignore[arg-type]
    sealed = seal(KEY, plaintext, binding)
    assert is_sealed(sealed)
    assert open_(KEY, sealed, binding) == plaintext


@pytest.mark.parametrize(
    "moved",
    [
        PayloadBinding("run-2", 7, "event"),
        PayloadBinding("run-1", 8, "event"),
        PayloadBinding("run-1", 7, "snapshot"),
        PayloadBinding("run-1", 7, "event", b"StepCompleted"),
    ],
    ids=["other-run", "other-seq", "other-kind", "other-extra"],
)
def test_a_payload_moved_elsewhere_fails_naming_where_it_was_read(moved: PayloadBinding) -> None:
    sealed = seal(KEY, b"canary", AT)
    with pytest.raises(TamperedPayloadError) as caught:
        open_(KEY, sealed, moved)
    assert (caught.value.run_id, caught.value.seq) == (moved.run_id, moved.seq)
    assert isinstance(caught.value, CorruptEventError) and isinstance(caught.value, EncryptionError)


def test_the_plaintext_is_not_in_the_sealed_bytes() -> None:
    canary = b"CANARY-7f3a9c-customer-secret"
    assert canary not in seal(KEY, b"prefix " + canary + b" suffix", AT)


def test_every_flipped_byte_after_the_header_is_caught() -> None:
    sealed = seal(KEY, b"the canary payload " * 4, AT)
    header_len = read_header(sealed, AT).length
    for index in range(header_len, len(sealed)):
        bad = bytearray(sealed)
        bad[index] ^= 0x01
        with pytest.raises(TamperedPayloadError, match=r"run 'run-1' seq 7"):
            open_(KEY, bytes(bad), AT)


def test_an_edited_header_never_yields_plaintext() -> None:
    sealed = seal(KEY, b"canary", AT)
    for index in range(read_header(sealed, AT).length):
        bad = bytearray(sealed)
        bad[index] ^= 0x01
        with pytest.raises((EncryptionError, CorruptEventError)):
            open_(KEY, bytes(bad), AT)


def test_another_data_key_for_the_run_is_a_wrong_key_not_tampering() -> None:
    sealed = seal(KEY, b"canary", AT)
    other = _key(data_key_id="dk-2")
    with pytest.raises(WrongKeyError, match=r"'dk-1'.*'dk-2'") as caught:
        open_(other, sealed, AT, where="keyring file /tmp/x")
    assert not isinstance(caught.value, TamperedPayloadError)


def test_same_key_id_other_key_bytes_is_a_tag_failure() -> None:
    sealed = seal(KEY, b"canary", AT)
    with pytest.raises(TamperedPayloadError):
        open_(_key(), sealed, AT)


def test_header_says_version_algorithm_and_key_id() -> None:
    sealed = seal(KEY, b"x", AT)
    header = read_header(sealed, AT)
    assert (header.version, header.algorithm, header.key_id) == (2, 1, "dk-1")
    assert sealed.startswith(MAGIC)


def test_a_version_2_payload_relabelled_version_1_fails_its_tag() -> None:
    """Version 1 bound no metadata; the version byte is authenticated, so a
    payload cannot be passed off as version 1 to shed its metadata binding."""
    with_meta = PayloadBinding("run-1", 7, "event", b"T", b"metadata")
    sealed = bytearray(seal(KEY, b"x", with_meta))
    sealed[len(MAGIC)] = 1
    with pytest.raises(TamperedPayloadError):
        open_(KEY, bytes(sealed), with_meta)
    with pytest.raises(TamperedPayloadError):
        open_(KEY, bytes(sealed), PayloadBinding("run-1", 7, "event", b"T"))


def test_the_metadata_is_bound_to_the_payload() -> None:
    sealed = seal(KEY, b"x", PayloadBinding("run-1", 7, "event", b"T", b"step=a"))
    assert open_(KEY, sealed, PayloadBinding("run-1", 7, "event", b"T", b"step=a")) == b"x"
    with pytest.raises(TamperedPayloadError):
        open_(KEY, sealed, PayloadBinding("run-1", 7, "event", b"T", b"step=b"))


@pytest.mark.parametrize(
    "value", [{"a": 1}, [1, 2], "text", b"bytes", 0, None, True, 1.5, {"k": {"nested": [None]}}]
)
def test_plain_msgpack_payloads_are_never_taken_for_sealed_ones(value: object) -> None:
    assert not is_sealed(msgpack.packb(value))


def test_unknown_version_or_algorithm_says_a_newer_agentlog_wrote_it() -> None:
    sealed = bytearray(seal(KEY, b"x", AT))
    sealed[len(MAGIC)] = 9
    with pytest.raises(CorruptEventError, match="newer agentlog"):
        open_(KEY, bytes(sealed), AT)


def test_truncated_payload_is_corrupt_naming_run_and_seq() -> None:
    sealed = seal(KEY, b"x", AT)
    with pytest.raises(CorruptEventError, match=r"run 'run-1' seq 7.*truncated"):
        open_(KEY, sealed[:20], AT)


def test_data_key_bytes_stay_out_of_repr() -> None:
    assert KEY.plaintext.hex() not in repr(KEY)
