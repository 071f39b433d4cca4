"""Encryption at rest end to end on SQLite: KEK rotation, tampering, wrong keyrings.

Each case goes through the runtime and real files, and must end in a typed
error or the right state: never wrong plaintext, nothing else lost.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentlog.crypto import LocalKeyStore
from agentlog.errors import (
    KeyStoreMissingError,
    MissingDataKeyError,
    TamperedPayloadError,
    WrongKeyError,
)
from agentlog.eventlog._sealing import SEALED_KEY
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.codec import row_checksum, unpack
from agentlog.projector import load_state
from agentlog.runtime import Runtime
from tests.support.shred import CANARY, ONE_SHOT, canary_workflow


async def _run(url: str, keys: LocalKeyStore | None, run_id: str) -> None:
    wf = canary_workflow()
    async with await Runtime.open(url, workflows=[wf], config=ONE_SHOT, keys=keys) as rt:
        await rt.start(wf, run_id=run_id, input={"secret": f"{CANARY}-{run_id}"}, durability="sync")
        await rt.wait(run_id)


async def test_runs_before_and_after_a_kek_rotation_both_replay(tmp_path: Path) -> None:
    url, path = f"sqlite:///{tmp_path / 'log.db'}", tmp_path / "keyring.json"
    await _run(url, LocalKeyStore(path), "before")
    new_kek = LocalKeyStore(path).rotate()
    await _run(url, LocalKeyStore(path), "after")
    keys = LocalKeyStore(path)  # a fresh process's view: nothing cached
    assert keys.lookup("before").kek_id != keys.lookup("after").kek_id == new_kek
    async with await open_log(url, keys=keys) as log:
        for run_id in ("before", "after"):
            state = await load_state(log, run_id, use_snapshots=False)
            assert state.input == {"secret": f"{CANARY}-{run_id}"}
            assert state.values["found"] == f"{CANARY}-task-result"
            assert (await load_state(log, run_id)).values == state.values  # snapshot path


def _tamper_task_result(db: Path, run_id: str) -> int:
    """Flip one byte in the sealed blob of the run's TaskCompleted and fix up the
    row's checksum, so only the GCM tag can tell. Returns the event's seq."""
    with sqlite3.connect(db) as conn:
        seq, type_, ts, schema_v, epoch, payload = conn.execute(
            "SELECT seq, type, ts, schema_v, writer_epoch, payload FROM events "
            "WHERE run_id = ? AND type = 'TaskCompleted'",
            (run_id,),
        ).fetchone()
        blob = unpack(payload)[SEALED_KEY]
        at = payload.index(blob) + len(blob) // 2  # inside the ciphertext
        changed = payload[:at] + bytes([payload[at] ^ 0x01]) + payload[at + 1 :]
        checksum = row_checksum(run_id, seq, type_, ts, schema_v, epoch, changed)
        conn.execute(
            "UPDATE events SET payload = ?, checksum = ? WHERE run_id = ? AND seq = ?",
            (changed, checksum, run_id, seq),
        )
    return int(seq)


async def test_a_tampered_ciphertext_raises_naming_the_run_and_seq(tmp_path: Path) -> None:
    db, keys = tmp_path / "log.db", LocalKeyStore(tmp_path / "keyring.json")
    url = f"sqlite:///{db}"
    await _run(url, keys, "r1")
    await _run(url, keys, "r2")
    seq = _tamper_task_result(db, "r1")
    async with await open_log(url, keys=LocalKeyStore(tmp_path / "keyring.json")) as log:
        with pytest.raises(TamperedPayloadError) as caught:
            await load_state(log, "r1", use_snapshots=False)
        assert caught.value.run_id == "r1" and caught.value.seq == seq
        assert f"seq {seq}" in str(caught.value) and "'r1'" in str(caught.value)
        # Nothing else lost: the other run and the first events still read.
        assert (await load_state(log, "r2")).values["secret"] == f"{CANARY}-state"
        assert (await load_state(log, "r1", at_seq=seq - 1)).input == {"secret": f"{CANARY}-r1"}


async def test_another_keyring_gives_typed_errors_never_wrong_plaintext(tmp_path: Path) -> None:
    db_a, db_b = tmp_path / "a.db", tmp_path / "b.db"
    keys_a = LocalKeyStore(tmp_path / "a.json")
    keys_b = LocalKeyStore(tmp_path / "b.json")
    await _run(f"sqlite:///{db_a}", keys_a, "r1")
    await _run(f"sqlite:///{db_b}", keys_b, "r1")  # the same run id, another keyring
    fresh = LocalKeyStore(tmp_path / "fresh.json")
    async with await open_log(f"sqlite:///{db_a}", keys=fresh) as log:
        with pytest.raises(MissingDataKeyError, match="'r1'"):
            await load_state(log, "r1", use_snapshots=False)
        with pytest.raises(MissingDataKeyError):
            await load_state(log, "r1")  # the snapshot path too
    async with await open_log(f"sqlite:///{db_a}", keys=LocalKeyStore(tmp_path / "b.json")) as log:
        with pytest.raises(WrongKeyError, match="'r1'"):
            await load_state(log, "r1", use_snapshots=False)
    async with await open_log(f"sqlite:///{db_a}") as log:
        with pytest.raises(KeyStoreMissingError, match="AGENTLOG_KEYRING"):
            await load_state(log, "r1", use_snapshots=False)
    # Nothing was changed: the right keyring still reads it.
    async with await open_log(f"sqlite:///{db_a}", keys=LocalKeyStore(tmp_path / "a.json")) as log:
        assert (await load_state(log, "r1")).input == {"secret": f"{CANARY}-r1"}
    assert not fresh.path.exists() or "r1" not in fresh.path.read_text()
