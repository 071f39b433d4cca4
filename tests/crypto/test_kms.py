"""KmsKeyStore through moto_server's KMS, with wrapped keys in a file or in S3."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from agentlog.crypto import FileKeyTable, KmsKeyStore, PayloadCipher, S3KeyTable
from agentlog.errors import (
    CorruptKeyringError,
    KekDisabledError,
    KeyStoreUnavailableError,
    ShreddedError,
    UnknownKekError,
)

pytestmark = pytest.mark.s3
CANARY = b"CANARY-kms-customer-secret"


def test_wrap_and_unwrap_through_kms(kms: Any, kms_key: str, tmp_path: Path) -> None:
    table = tmp_path / "keys.json"
    store = KmsKeyStore(kms_key, FileKeyTable(table), client=kms)
    key = store.wrap("run-1")
    assert len(key.plaintext) == 32 and key.kek_id.endswith(kms_key)
    blob = PayloadCipher(store).seal("run-1", 1, "event", CANARY)

    fresh = KmsKeyStore(kms_key, FileKeyTable(table), client=kms)  # as a new process would
    assert fresh.data_key("run-1") == key
    assert PayloadCipher(fresh).open("run-1", 1, "event", blob) == CANARY
    assert key.plaintext not in table.read_bytes()


def test_the_encryption_context_binds_the_run(kms: Any, kms_key: str, tmp_path: Path) -> None:
    store = KmsKeyStore(kms_key, FileKeyTable(tmp_path / "keys.json"), client=kms)
    store.wrap("victim")
    stolen = store.lookup("victim")
    from agentlog.crypto import WrappedKey

    moved = WrappedKey("attacker", stolen.data_key_id, stolen.kek_id, stolen.wrapped)
    with pytest.raises(CorruptKeyringError, match="KMS rejects the wrapped key"):
        store.unwrap(moved)


def test_a_disabled_key_is_a_typed_error(kms: Any, kms_key: str, tmp_path: Path) -> None:
    table = FileKeyTable(tmp_path / "keys.json")
    KmsKeyStore(kms_key, table, client=kms).wrap("run-1")
    kms.disable_key(KeyId=kms_key)
    store = KmsKeyStore(kms_key, table, client=kms)
    with pytest.raises(KekDisabledError, match=r"is disabled in KMS.*enable-key") as caught:
        store.wrap("run-2")
    assert caught.value.state == "disabled"
    with pytest.raises(KekDisabledError):
        store.data_key("run-1")
    kms.enable_key(KeyId=kms_key)
    assert store.data_key("run-1").run_id == "run-1"  # nothing was lost meanwhile


def test_a_key_pending_deletion_is_a_typed_error(kms: Any, kms_key: str, tmp_path: Path) -> None:
    kms.schedule_key_deletion(KeyId=kms_key, PendingWindowInDays=7)
    store = KmsKeyStore(kms_key, FileKeyTable(tmp_path / "keys.json"), client=kms)
    with pytest.raises(KekDisabledError, match="pending deletion"):
        store.wrap("run-1")


@pytest.mark.parametrize(
    "key_id", ["0f0e0d0c-0000-4000-8000-000000000000", "alias/agentlog-missing"]
)
def test_an_unknown_key_id_is_a_typed_error(kms: Any, key_id: str, tmp_path: Path) -> None:
    store = KmsKeyStore(key_id, FileKeyTable(tmp_path / "keys.json"), client=kms)
    with pytest.raises(UnknownKekError, match="KMS has no key-encryption key"):
        store.wrap("run-1")
    assert not (tmp_path / "keys.json").exists()  # nothing was written


def test_rotation_keeps_old_keys_unwrapping(kms: Any, kms_key: str, tmp_path: Path) -> None:
    store = KmsKeyStore(kms_key, FileKeyTable(tmp_path / "keys.json"), client=kms)
    old = PayloadCipher(store).seal("old-run", 1, "event", CANARY)
    assert store.rotate() == kms_key
    assert [r["RotationType"] for r in kms.list_key_rotations(KeyId=kms_key)["Rotations"]] == [
        "ON_DEMAND"
    ]
    new = PayloadCipher(store).seal("new-run", 1, "event", b"new")
    fresh = PayloadCipher(KmsKeyStore(kms_key, FileKeyTable(tmp_path / "keys.json"), client=kms))
    assert fresh.open("old-run", 1, "event", old) == CANARY
    assert fresh.open("new-run", 1, "event", new) == b"new"


def test_s3_table_shred_leaves_no_version_of_the_wrapped_key(
    kms: Any, kms_key: str, s3: Any, key_bucket: str
) -> None:
    store = KmsKeyStore(kms_key, S3KeyTable(key_bucket, client=s3), client=kms)
    cipher = PayloadCipher(store)
    blob = cipher.seal("run/1", 4, "event", CANARY)
    cipher.seal("run-2", 1, "event", b"kept")
    wrapped = store.lookup("run/1").wrapped
    store.wrap("run/1")  # a second wrap adds no version: the key is read, not rewritten

    when = cipher.shred("run/1")

    versions = s3.list_object_versions(Bucket=key_bucket, Prefix="agentlog-keys/run%2F1")
    assert len(versions.get("Versions", [])) == 1 and not versions.get("DeleteMarkers")
    only = s3.get_object(Bucket=key_bucket, Key=versions["Versions"][0]["Key"])["Body"].read()
    assert wrapped not in only and when.encode() in only
    fresh = KmsKeyStore(kms_key, S3KeyTable(key_bucket, client=s3), client=kms)
    with pytest.raises(ShreddedError, match=r"run 'run/1' was shredded .*s3://"):
        PayloadCipher(fresh).open("run/1", 4, "event", blob)
    with pytest.raises(ShreddedError):
        fresh.wrap("run/1")
    assert fresh.is_shredded("run/1") and not fresh.is_shredded("run-2")
    assert fresh.data_key("run-2").run_id == "run-2"
    assert fresh.destroy("run/1") == when


def test_s3_table_racing_writers_agree_on_one_key(
    kms: Any, kms_key: str, s3: Any, key_bucket: str
) -> None:
    stores = [KmsKeyStore(kms_key, S3KeyTable(key_bucket, client=s3), client=kms) for _ in range(4)]
    got: list[bytes] = []
    barrier = threading.Barrier(len(stores))

    def start(store: KmsKeyStore) -> None:
        barrier.wait(timeout=60)
        got.append(store.wrap("contested").plaintext)

    threads = [threading.Thread(target=start, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(got) == 4 and len(set(got)) == 1
    assert stores[0].data_key("contested").plaintext == got[0]


def test_a_missing_bucket_is_a_typed_error(kms: Any, kms_key: str, s3: Any) -> None:
    store = KmsKeyStore(kms_key, S3KeyTable("no-such-bucket-agentlog", client=s3), client=kms)
    with pytest.raises(KeyStoreUnavailableError, match="NoSuchBucket"):
        store.wrap("run-1")
