"""Crypto-shredding a run on SQLite: the canary on disk, before and after ``Runtime.shred``.

Real files, a real keyring: the canary must never be on disk in clear (the
SQLite file and its WAL), must read back through the API while the key
exists, and must be unreadable through every path once the key is
destroyed, while the metadata stays listable, countable and auditable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentlog.crypto import LocalKeyStore
from agentlog.errors import (
    MissingDataKeyError,
    NoKeyStoreError,
    NotEncryptedError,
    ShreddedError,
    UnknownRunError,
)
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import RunStatus
from agentlog.projector import load_state
from agentlog.runtime import Runtime
from tests.support.shred import (
    CANARY,
    ONE_SHOT,
    canary_workflow,
    metadata,
    raw_bytes,
    shred_record,
    sqlite_files,
)


async def _parked_run(db: Path, keys: LocalKeyStore | None, run_id: str = "r1") -> None:
    wf = canary_workflow()
    async with await Runtime.open(
        f"sqlite:///{db}", workflows=[wf], config=ONE_SHOT, keys=keys
    ) as rt:
        await rt.start(wf, run_id=run_id, input={"secret": f"{CANARY}-input"}, durability="sync")
        state = await rt.wait(run_id)
        assert state.status == RunStatus.WAITING


async def test_the_canary_is_never_on_disk_in_clear_and_reads_back_through_the_api(
    tmp_path: Path,
) -> None:
    db, keys = tmp_path / "log.db", LocalKeyStore(tmp_path / "keyring.json")
    await _parked_run(db, keys)
    assert raw_bytes(*sqlite_files(db)), "the log was written"
    assert CANARY.encode() not in raw_bytes(*sqlite_files(db))
    # The same run with no key store writes the canary in clear: the check can see it.
    plain = tmp_path / "plain.db"
    await _parked_run(plain, None)
    assert CANARY.encode() in raw_bytes(*sqlite_files(plain))

    async with await Runtime.open(f"sqlite:///{db}", config=ONE_SHOT, keys=keys) as rt:
        state = await rt.get_state("r1")
        assert state.input == {"secret": f"{CANARY}-input"}
        assert state.values["found"] == f"{CANARY}-task-result"
        assert state.values["secret"] == f"{CANARY}-state"
        assert (await rt.pending("r1"))[0].payload == {"question": f"{CANARY}-question"}
        snapshot = await rt.log.load_snapshot("r1")
        assert snapshot is not None  # saved when it parked: sealed whole on disk


async def test_after_shred_every_path_is_unreadable_and_the_metadata_stays(
    tmp_path: Path,
) -> None:
    db, keys = tmp_path / "log.db", LocalKeyStore(tmp_path / "keyring.json")
    await _parked_run(db, keys)
    await _parked_run(db, keys, run_id="r2")  # another run keeps working
    url = f"sqlite:///{db}"
    async with await Runtime.open(url, config=ONE_SHOT, keys=keys) as rt:
        before = await metadata(rt.log, "r1")
        report = await rt.shred("r1")
        assert report.cancelled and not report.already and report.recorded_seq is not None

    async with await Runtime.open(
        url, workflows=[canary_workflow()], config=ONE_SHOT, keys=keys
    ) as rt:
        with pytest.raises(ShreddedError, match="'r1' was shredded"):
            await rt.get_state("r1")
        with pytest.raises(ShreddedError):
            await load_state(rt.log, "r1", use_snapshots=False)
        with pytest.raises(ShreddedError):
            await rt.log.load_snapshot("r1")
        with pytest.raises(ShreddedError):
            await rt.resume("r1", "yes")
        with pytest.raises(ShreddedError):
            await load_state(rt.log, "r1", at_seq=2)  # time travel too
        # Metadata: listed, counted, audited.
        info = await rt.log.get_run("r1")
        assert info.status == RunStatus.SHREDDED and info.workflow == "canary"
        assert {i.run_id for i in await rt.log.list_runs()} == {"r1", "r2"}
        assert [i.run_id for i in await rt.log.list_runs(status=RunStatus.SHREDDED)] == ["r1"]
        after = await metadata(rt.log, "r1")
        assert after[: len(before)] == before
        assert [t for _, t, _ in after[len(before) :]] == [
            "WriterClaimed",
            "RunCancelled",
            "RunShredded",
        ]
        assert ("lookup" in {name for _, _, name in after}) and after[-1][0] == info.last_seq
        shredded = await shred_record(rt.log, "r1")
        assert shredded[0].at == report.shredded_at and shredded[0].by == rt.config.owner
        # The other run is untouched.
        assert (await rt.get_state("r2")).values["secret"] == f"{CANARY}-state"
    assert CANARY.encode() not in raw_bytes(*sqlite_files(db))


async def test_shredding_again_records_nothing_and_does_not_fail(tmp_path: Path) -> None:
    db, keys = tmp_path / "log.db", LocalKeyStore(tmp_path / "keyring.json")
    await _parked_run(db, keys)
    async with await Runtime.open(f"sqlite:///{db}", config=ONE_SHOT, keys=keys) as rt:
        first = await rt.shred("r1")
        last_seq = (await rt.log.get_run("r1")).last_seq
        again = await rt.shred("r1")
        assert again.already and again.recorded_seq is None
        assert again.shredded_at == first.shredded_at
        assert (await rt.log.get_run("r1")).last_seq == last_seq
        assert len(await shred_record(rt.log, "r1")) == 1


async def test_shred_of_a_completed_run_cancels_nothing(tmp_path: Path) -> None:
    db, keys = tmp_path / "log.db", LocalKeyStore(tmp_path / "keyring.json")
    await _parked_run(db, keys)
    async with await Runtime.open(
        f"sqlite:///{db}", workflows=[canary_workflow()], config=ONE_SHOT, keys=keys
    ) as rt:
        await rt.resume("r1", "yes")
        assert (await rt.wait("r1")).status == RunStatus.COMPLETED
        report = await rt.shred("r1")
        assert not report.cancelled
        assert (await rt.log.get_run("r1")).status == RunStatus.SHREDDED
        types = [t for _, t, _ in await metadata(rt.log, "r1")]
        assert types[-2:] == ["RunCompleted", "RunShredded"]  # how it ended stays on record


async def test_shred_with_no_key_store_says_to_set_the_keyring(tmp_path: Path) -> None:
    db, keys = tmp_path / "log.db", LocalKeyStore(tmp_path / "keyring.json")
    await _parked_run(db, keys)
    async with await Runtime.open(f"sqlite:///{db}", config=ONE_SHOT) as rt:
        with pytest.raises(NoKeyStoreError, match="AGENTLOG_KEYRING"):
            await rt.shred("r1")
        assert [t for _, t, _ in await metadata(rt.log, "r1")][-1] != "RunShredded"
    assert not keys.is_shredded("r1")


async def test_a_plain_run_cannot_be_shredded_and_nothing_changes(tmp_path: Path) -> None:
    db, keys = tmp_path / "log.db", LocalKeyStore(tmp_path / "keyring.json")
    await _parked_run(db, None)
    async with await Runtime.open(f"sqlite:///{db}", config=ONE_SHOT, keys=keys) as rt:
        last_seq = (await rt.log.get_run("r1")).last_seq
        with pytest.raises(NotEncryptedError, match="stored in clear"):
            await rt.shred("r1")
        info = await rt.log.get_run("r1")
        assert info.last_seq == last_seq and info.status == RunStatus.WAITING
        assert (await rt.get_state("r1")).values["secret"] == f"{CANARY}-state"
    assert not keys.is_shredded("r1")


async def test_shred_of_an_unknown_run(tmp_path: Path) -> None:
    keys = LocalKeyStore(tmp_path / "keyring.json")
    async with await Runtime.open(
        f"sqlite:///{tmp_path / 'log.db'}", config=ONE_SHOT, keys=keys
    ) as rt:
        with pytest.raises(UnknownRunError):
            await rt.shred("nobody")


async def test_shred_with_another_keyring_destroys_nothing(tmp_path: Path) -> None:
    db, keys = tmp_path / "log.db", LocalKeyStore(tmp_path / "keyring.json")
    other = LocalKeyStore(tmp_path / "other.json")
    await _parked_run(db, keys)
    async with await Runtime.open(f"sqlite:///{db}", config=ONE_SHOT, keys=other) as rt:
        with pytest.raises(MissingDataKeyError):
            await rt.shred("r1")
    assert not other.is_shredded("r1") and not keys.is_shredded("r1")
    async with await open_log(f"sqlite:///{db}", keys=keys) as log:
        assert (await load_state(log, "r1")).values["secret"] == f"{CANARY}-state"
