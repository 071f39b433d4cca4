"""Whoever can write the store cannot make an encrypted run read as their plaintext.

An encrypted run's key store knows it is encrypted: a payload of that run
found in clear (content, snapshot or command) is tampering, and so is a
sealed event whose clear metadata (step, task key, attempt...) was edited.
Each attack recomputes the row checksum, so only the encryption can tell.
A run that began in clear and was continued with a key store keeps its
clear events readable.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.errors import TamperedPayloadError
from agentlog.eventlog._base import Command
from agentlog.eventlog._sealing import SEALED_KEY
from agentlog.eventlog.codec import (
    decode_stored_payload,
    encode_stored_payload,
    pack,
    row_checksum,
    unpack,
)
from agentlog.eventlog.events import Event, ResumeReceived, StepFailed, TaskFailed
from agentlog.eventlog.kafka._commands import decode_command, encode_command
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.projector import load_state
from agentlog.projector._snapshots import SnapshotChain
from agentlog.projector._state import RunState
from tests.support.tamper import ATTACKER, ATTACKS, SECRET, TASK_SEQ, sealed_run


def _keys(tmp_path: Path) -> PayloadCipher:
    return PayloadCipher(LocalKeyStore(tmp_path / "keyring.json"))


def _rewrite(db: Path, run_id: str, seq: int, attack: str) -> None:
    """Replace one stored payload and recompute its row's checksum."""
    with sqlite3.connect(db) as conn:
        type_, ts, schema_v, epoch, payload = conn.execute(
            "SELECT type, ts, schema_v, writer_epoch, payload FROM events "
            "WHERE run_id = ? AND seq = ?",
            (run_id, seq),
        ).fetchone()
        changed = ATTACKS[attack](payload)
        checksum = row_checksum(run_id, seq, type_, ts, schema_v, epoch, changed)
        conn.execute(
            "UPDATE events SET payload = ?, checksum = ? WHERE run_id = ? AND seq = ?",
            (changed, checksum, run_id, seq),
        )


async def _record(log: SqliteEventLog, run_id: str) -> None:
    await log.append(sealed_run(run_id, await log.claim_writer(run_id)))


@pytest.mark.parametrize("attack", sorted(ATTACKS))
async def test_an_attack_on_a_sealed_event_is_refused_by_a_reader_with_the_key(
    tmp_path: Path, attack: str
) -> None:
    db = tmp_path / "log.db"
    async with SqliteEventLog(db, cipher=_keys(tmp_path)) as log:
        await _record(log, "r1")
        await _record(log, "r2")
    _rewrite(db, "r1", TASK_SEQ, attack)
    async with SqliteEventLog(db, cipher=_keys(tmp_path)) as log:  # nothing cached
        with pytest.raises(TamperedPayloadError, match=rf"run 'r1' seq {TASK_SEQ}"):
            await load_state(log, "r1", use_snapshots=False)
        with pytest.raises(TamperedPayloadError):
            _ = [e async for e in log.read("r1")]
        # Nothing else lost: the events before it and the other run still read.
        before = await load_state(log, "r1", at_seq=TASK_SEQ - 1, use_snapshots=False)
        assert before.input == {"question": SECRET}
        assert (await load_state(log, "r2")).output == {"answer": SECRET}


def test_a_sealed_events_step_name_and_attempt_are_bound_to_it(tmp_path: Path) -> None:
    """Every clear field of a sealed event is authenticated, not only run, seq and type."""
    cipher = _keys(tmp_path)
    for data, field, value in (
        (StepFailed("plan", 0, 0, 2, "boom"), "step", "other"),
        (StepFailed("plan", 0, 0, 2, "boom"), "attempt", 1),
        (TaskFailed("k1", "boom", attempt=3), "attempt", 1),
        (TaskFailed("k1", "boom", attempt=3), "key", "k2"),
    ):
        stored = unpack(encode_stored_payload(Event("r", 5, data), cipher))
        assert SEALED_KEY in stored and field in stored
        edited = pack({**stored, field: value})
        with pytest.raises(TamperedPayloadError, match="run 'r' seq 5"):
            decode_stored_payload(data.type, 1, edited, cipher, run_id="r", seq=5)


async def test_a_plain_snapshot_over_a_sealed_one_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    async with SqliteEventLog(db, cipher=_keys(tmp_path)) as log:
        await _record(log, "r1")
        state = await load_state(log, "r1")
        await log.save_snapshot(SnapshotChain().encode(state))
    forged = RunState(run_id="r1")
    forged.seq, forged.values = state.seq, {"notes": ATTACKER}
    plain = SnapshotChain().encode(forged)
    async with SqliteEventLog(db) as keyless:  # the attacker writes without the key
        await keyless.save_snapshot(plain)
    async with SqliteEventLog(db, cipher=_keys(tmp_path)) as log:
        with pytest.raises(TamperedPayloadError, match=rf"run 'r1' seq {state.seq}.*in clear"):
            await load_state(log, "r1")


def test_a_plain_command_for_an_encrypted_run_is_refused(tmp_path: Path) -> None:
    cipher = _keys(tmp_path)
    cipher.seal("r1", 1, "event", b"the run's first payload")  # the run has a key now
    plain = encode_command(Command("r1", "resume", ResumeReceived(answers={"0:0:0": ATTACKER})))
    with pytest.raises(TamperedPayloadError, match="command"):
        decode_command(plain, (0, 7), "commands[0]@7", cipher)
    answer = ResumeReceived(answers={"0:0:0": "ok"})
    sealed = encode_command(Command("r1", "resume", answer), cipher)
    assert decode_command(sealed, (0, 8), "commands[0]@8", cipher).data == answer


async def test_a_run_begun_in_clear_and_continued_sealed_reads_whole(tmp_path: Path) -> None:
    """Turning encryption on under a parked run: its clear events stay readable,
    and from the first sealed one on, clear content is refused."""
    db = tmp_path / "log.db"
    events = sealed_run("r1", 1)
    async with SqliteEventLog(db) as plain_log:
        epoch = await plain_log.claim_writer("r1")
        await plain_log.append([Event(e.run_id, e.seq, e.data, e.ts, epoch) for e in events[:2]])
    async with SqliteEventLog(db, cipher=_keys(tmp_path)) as log:
        rest = [Event(e.run_id, e.seq, e.data, e.ts, epoch) for e in events[2:]]
        await log.append(rest)
    assert LocalKeyStore(tmp_path / "keyring.json").lookup("r1").sealed_from == TASK_SEQ
    async with SqliteEventLog(db, cipher=_keys(tmp_path)) as log:
        state = await load_state(log, "r1", use_snapshots=False)
        assert state.input == {"question": SECRET} and state.output == {"answer": SECRET}
    _rewrite(db, "r1", TASK_SEQ, "downgrade")
    async with SqliteEventLog(db, cipher=_keys(tmp_path)) as log:
        with pytest.raises(TamperedPayloadError, match=rf"seq {TASK_SEQ}"):
            await load_state(log, "r1", use_snapshots=False)


async def test_plain_runs_still_read_with_a_key_store_asking_it_once_per_run(
    tmp_path: Path,
) -> None:
    db = tmp_path / "log.db"
    async with SqliteEventLog(db) as plain_log:
        await _record(plain_log, "plain")
    keyring = LocalKeyStore(tmp_path / "keyring.json")
    asked: list[str] = []
    real = keyring.sealed_from

    def counting(run_id: str) -> int | None:
        asked.append(run_id)
        return real(run_id)

    keyring.sealed_from = counting  # type: ignore[method-assign]
    async with SqliteEventLog(db, cipher=PayloadCipher(keyring)) as log:
        for _ in range(3):
            assert (await load_state(log, "plain", use_snapshots=False)).output == {
                "answer": SECRET
            }
    assert asked == ["plain"]
