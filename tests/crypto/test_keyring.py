"""The local keyring file: created 0600, shared by processes, shredding, KEK rotation."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from agentlog.crypto import LocalKeyStore, PayloadCipher, open_payload
from agentlog.errors import (
    CorruptKeyringError,
    KeyStoreMissingError,
    MissingDataKeyError,
    ShreddedError,
    UnknownKekError,
    WrongKeyError,
)

_REPO = Path(__file__).resolve().parents[2]
CANARY = b"CANARY-4b1d-customer-secret"


def _child(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.crypto.keyring_child", *args],
        cwd=_REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _open_in_child(path: Path, run_id: str, blob: bytes, seq: int) -> str:
    proc = _child("open", str(path), run_id, blob.hex(), str(seq))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return out.strip()


def test_created_on_first_use_with_0600(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "keyring.json"
    keyring = LocalKeyStore(path)
    assert not path.exists()  # nothing until a key is needed
    keyring.wrap("run-1")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    lock = path.with_name(path.name + ".lock")
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_a_run_gets_one_key_in_every_instance(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    first = LocalKeyStore(path).wrap("run-1")
    again = LocalKeyStore(path).wrap("run-1")
    read = LocalKeyStore(path).data_key("run-1")
    assert first == again == read
    assert len(first.plaintext) == 32
    assert LocalKeyStore(path).wrap("run-2").plaintext != first.plaintext


def test_sealed_payload_round_trips_and_the_file_holds_no_plaintext_key(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    cipher = PayloadCipher(LocalKeyStore(path))
    blob = cipher.seal("run-1", 3, "event", CANARY)
    assert CANARY not in blob
    assert PayloadCipher(LocalKeyStore(path)).open("run-1", 3, "event", blob) == CANARY
    key = LocalKeyStore(path).data_key("run-1").plaintext
    assert key not in path.read_bytes() and key.hex().encode() not in path.read_bytes()


@pytest.mark.process
def test_shredded_run_is_unreadable_forever_in_new_instances_and_processes(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    keyring = LocalKeyStore(path)
    cipher = PayloadCipher(keyring)
    blob = cipher.seal("run-1", 1, "event", CANARY)
    other = cipher.seal("run-2", 1, "event", b"kept")
    wrapped = keyring.lookup("run-1").wrapped
    assert _open_in_child(path, "run-1", blob, 1) == CANARY.decode()

    when = cipher.shred("run-1")

    with pytest.raises(ShreddedError, match="run 'run-1' was shredded") as caught:
        cipher.open("run-1", 1, "event", blob)
    assert caught.value.shredded_at == when
    fresh = LocalKeyStore(path)
    assert fresh.is_shredded("run-1") and not fresh.is_shredded("run-2")
    with pytest.raises(ShreddedError):
        fresh.data_key("run-1")
    with pytest.raises(ShreddedError):  # never a new key for a shredded run
        fresh.wrap("run-1")
    assert _open_in_child(path, "run-1", blob, 1) == "ShreddedError"
    assert _open_in_child(path, "run-2", other, 1) == "kept"
    from agentlog.crypto._keyfile import b64

    assert b64(wrapped).encode() not in path.read_bytes()
    assert fresh.destroy("run-1") == when  # idempotent: the first time stands


@pytest.mark.process
def test_kek_rotation_keeps_old_payloads_readable(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    keyring = LocalKeyStore(path)
    old = PayloadCipher(keyring).seal("old-run", 1, "snapshot", CANARY)
    assert keyring.lookup("old-run").kek_id == "local-1"

    assert keyring.rotate() == "local-2"

    new = PayloadCipher(keyring).seal("new-run", 1, "event", b"new")
    assert keyring.lookup("new-run").kek_id == "local-2"
    assert LocalKeyStore(path).lookup("old-run").kek_id == "local-1"
    assert PayloadCipher(LocalKeyStore(path)).open("old-run", 1, "snapshot", old) == CANARY
    assert _open_in_child(path, "new-run", new, 1) == "new"


@pytest.mark.process
def test_two_processes_adding_keys_at_once_lose_none(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    count = 40
    procs = [_child("wrap", str(path), name, str(count)) for name in ("a", "b")]
    for proc in procs:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line == "ready\n", proc.stderr.read() if proc.stderr else ""
    for proc in procs:  # both start together, so their writes interleave
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    seen: dict[str, str] = {}
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        seen |= json.loads(out)
    assert len(seen) == 2 * count
    keyring = LocalKeyStore(path)
    for run_id, hexkey in seen.items():
        assert keyring.data_key(run_id).plaintext.hex() == hexkey


def test_a_run_this_keyring_never_keyed_says_which_store(tmp_path: Path) -> None:
    with pytest.raises(MissingDataKeyError, match=r"run 'ghost' has no data key in .*keyring"):
        LocalKeyStore(tmp_path / "keyring.json").data_key("ghost")


def test_another_keyring_with_the_same_run_id_is_a_wrong_key(tmp_path: Path) -> None:
    blob = PayloadCipher(LocalKeyStore(tmp_path / "a.json")).seal("order-42", 5, "event", CANARY)
    other = PayloadCipher(LocalKeyStore(tmp_path / "b.json"))
    other.seal("order-42", 1, "event", b"unrelated")  # same run id, another machine's keyring
    with pytest.raises(WrongKeyError, match=r"run 'order-42' seq 5 .*b\.json"):
        other.open("order-42", 5, "event", blob)


def test_sealed_payload_without_a_key_store_says_to_set_the_keyring(tmp_path: Path) -> None:
    blob = PayloadCipher(LocalKeyStore(tmp_path / "k.json")).seal("run-1", 2, "event", CANARY)
    with pytest.raises(KeyStoreMissingError, match="AGENTLOG_KEYRING=PATH"):
        open_payload(None, "run-1", 2, "event", blob)
    assert open_payload(None, "run-1", 2, "event", b"\x81\xa1a\x01") == b"\x81\xa1a\x01"


def test_a_wrapped_key_copied_to_another_run_does_not_unwrap(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    keyring = LocalKeyStore(path)
    keyring.wrap("victim")
    keyring.wrap("attacker")
    doc = json.loads(path.read_text())
    doc["runs"]["attacker"] = doc["runs"]["victim"]
    path.write_text(json.dumps(doc))
    with pytest.raises(CorruptKeyringError, match="run 'attacker' does not unwrap"):
        LocalKeyStore(path).data_key("attacker")


def test_a_kek_version_missing_from_the_file_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    LocalKeyStore(path).wrap("run-1")
    doc = json.loads(path.read_text())
    doc["keks"] = {"local-9": doc["keks"]["local-1"]}
    doc["current_kek"] = "local-9"
    path.write_text(json.dumps(doc))
    with pytest.raises(UnknownKekError, match="'local-1'"):
        LocalKeyStore(path).data_key("run-1")


@pytest.mark.parametrize("content", [b"{not json", b"[]", b'{"format": "other"}'])
def test_a_corrupt_keyring_file_is_a_typed_error_and_is_left_alone(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "keyring.json"
    path.write_bytes(content)
    with pytest.raises(CorruptKeyringError, match="do not delete it"):
        LocalKeyStore(path).wrap("run-1")
    assert path.read_bytes() == content


def test_from_env_reads_agentlog_keyring(tmp_path: Path) -> None:
    assert LocalKeyStore.from_env({}) is None
    assert LocalKeyStore.from_env({"AGENTLOG_KEYRING": "  "}) is None
    keyring = LocalKeyStore.from_env({"AGENTLOG_KEYRING": str(tmp_path / "k.json")})
    assert keyring is not None and keyring.path == tmp_path / "k.json"


def test_a_keyring_readable_by_others_is_warned_about(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    LocalKeyStore(path).wrap("run-1")
    path.chmod(0o644)
    with capture_logs() as logs:
        LocalKeyStore(path)
    assert [e["event"] for e in logs] == ["keyring_permissions_too_open"]
    assert logs[0]["fix"] == f"chmod 600 {path}"
