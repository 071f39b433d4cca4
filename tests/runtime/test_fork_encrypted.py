"""``Runtime.fork`` of an encrypted run: the copies are sealed under the new run's key.

Real SQLite files and a real keyring. The proof that nothing was copied as
the origin's ciphertext: once the origin is shredded (its key destroyed),
the fork still reads, resumes and finishes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentlog.crypto import LocalKeyStore
from agentlog.errors import KeyStoreMissingError, ShreddedError
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import RunStatus
from agentlog.runtime import Runtime
from tests.support.fork import events_of
from tests.support.shred import CANARY, ONE_SHOT, canary_workflow, raw_bytes, sqlite_files


async def _parked(url: str, keys: LocalKeyStore) -> int:
    wf = canary_workflow()
    async with await Runtime.open(url, workflows=[wf], config=ONE_SHOT, keys=keys) as rt:
        await rt.start(wf, run_id="origin", input={"secret": f"{CANARY}-input"}, durability="sync")
        state = await rt.wait("origin")
        assert state.status == RunStatus.WAITING
        return state.seq


async def test_the_fork_is_sealed_under_its_own_key_and_outlives_the_origins_shred(
    tmp_path: Path,
) -> None:
    db, keys = tmp_path / "log.db", LocalKeyStore(tmp_path / "keyring.json")
    url = f"sqlite:///{db}"
    at = await _parked(url, keys)
    wf = canary_workflow()
    async with await Runtime.open(url, workflows=[wf], config=ONE_SHOT, keys=keys) as rt:
        await rt.fork("origin", at, new_run_id="fork", updates={"found": f"{CANARY}-update"})
        fork = await rt.get_state("fork")
        assert fork.status == RunStatus.WAITING
        assert fork.values["secret"] == f"{CANARY}-state"
        assert fork.values["found"] == f"{CANARY}-update"
        origin_blobs = {e.sealed for e in await events_of(rt.log, "origin") if e.sealed}
        fork_blobs = {e.sealed for e in await events_of(rt.log, "fork") if e.sealed}
        assert fork_blobs and not fork_blobs & origin_blobs
        await rt.shred("origin")
    assert CANARY.encode() not in raw_bytes(*sqlite_files(db))
    # A fresh process (no cached keys): the origin is gone for good, the fork is not.
    keys = LocalKeyStore(tmp_path / "keyring.json")
    async with await Runtime.open(url, workflows=[wf], config=ONE_SHOT, keys=keys) as rt:
        with pytest.raises(ShreddedError):
            await rt.get_state("origin")
        with pytest.raises(ShreddedError):
            await rt.fork("origin", at, new_run_id="fork-2")
        assert await rt.log.find_run("fork-2") is None
        await rt.resume("fork", "yes")
        done = await rt.wait("fork")
    assert done.status == RunStatus.COMPLETED and done.values["answer"] == "yes"


async def test_a_shredded_origin_is_refused_even_while_its_key_is_cached(tmp_path: Path) -> None:
    db, keys = tmp_path / "log.db", LocalKeyStore(tmp_path / "keyring.json")
    url = f"sqlite:///{db}"
    at = await _parked(url, keys)
    wf = canary_workflow()
    async with await Runtime.open(url, workflows=[wf], config=ONE_SHOT, keys=keys) as rt:
        reader = await open_log(url, keys=keys)
        try:
            _ = await events_of(reader, "origin")  # caches the origin's key in this reader
            await rt.shred("origin")
            cached = Runtime(reader, workflows=[wf], config=ONE_SHOT)
            with pytest.raises(ShreddedError):
                await cached.fork("origin", at, new_run_id="resurrected")
            assert await reader.find_run("resurrected") is None
        finally:
            await reader.close()


async def test_an_encrypted_origin_without_its_key_store_is_refused(tmp_path: Path) -> None:
    db, keys = tmp_path / "log.db", LocalKeyStore(tmp_path / "keyring.json")
    url = f"sqlite:///{db}"
    at = await _parked(url, keys)
    async with await Runtime.open(url, workflows=[canary_workflow()], config=ONE_SHOT) as rt:
        with pytest.raises(KeyStoreMissingError):
            await rt.fork("origin", at, new_run_id="blank")
        assert await rt.log.find_run("blank") is None
