"""Files agentlog creates are its owner's alone (0600, folders 0700) unless told otherwise.

A log or an archive of runs recorded in clear holds their inputs and
results: created with the process umask (0644), every user of a shared host
could read them. The test runs under umask 022, the usual default.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentlog.archive import Archiver, open_archive
from agentlog.errors import ConfigError
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import Event, RunCompleted, RunStarted
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.archive.helpers import as_events
from tests.support.archive import NOW


@pytest.fixture(autouse=True)
def _umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _events(run_id: str, epoch: int) -> list[Event]:
    data = [RunStarted("wf", "1", {"q": "private"}, "sync", "fp"), RunCompleted({"a": 1})]
    return as_events(run_id, data, epoch=epoch)


async def _record(url: str) -> None:
    async with await open_log(url) as log:
        await log.append(_events("r1", await log.claim_writer("r1")))


async def test_a_new_sqlite_log_its_wal_and_shm_and_its_folders_are_private(
    tmp_path: Path,
) -> None:
    db = tmp_path / "new" / "deeper" / "log.db"
    os.chmod(tmp_path, 0o755)
    async with await open_log(f"sqlite:///{db}") as log:
        await log.append(_events("r1", await log.claim_writer("r1")))
        files = [db, db.with_name("log.db-wal"), db.with_name("log.db-shm")]
        assert all(f.exists() for f in files)
        assert {f.name: _mode(f) for f in files} == {f.name: 0o600 for f in files}
    assert _mode(tmp_path / "new") == _mode(tmp_path / "new" / "deeper") == 0o700
    assert _mode(tmp_path) == 0o755  # not ours: left alone


async def test_an_archive_its_parquet_and_manifest_are_private(tmp_path: Path) -> None:
    async with SqliteEventLog(tmp_path / "hot.db") as hot:
        await hot.append(_events("r1", await hot.claim_writer("r1")))
        store = open_archive(f"file://{tmp_path / 'archive'}")
        assert (await Archiver(hot, store).run(now=NOW)).runs == 1
    root = tmp_path / "archive"
    files = [p for p in root.rglob("*") if p.is_file()]
    folders = [root, *(p for p in root.rglob("*") if p.is_dir())]
    assert any(p.suffix == ".parquet" for p in files) and any("manifest" in str(p) for p in files)
    assert {str(p): _mode(p) for p in files} == {str(p): 0o600 for p in files}
    assert {str(p): _mode(p) for p in folders} == {str(p): 0o700 for p in folders}


async def test_file_mode_says_otherwise(tmp_path: Path) -> None:
    db = tmp_path / "shared" / "log.db"
    await _record(f"sqlite:///{db}?file_mode=0640")
    assert (_mode(db), _mode(db.parent)) == (0o640, 0o750)
    store = open_archive(f"file://{tmp_path / 'archive'}?file_mode=0644")
    store.put("a/b.parquet", b"x")
    assert (_mode(tmp_path / "archive" / "a" / "b.parquet"), _mode(tmp_path / "archive")) == (
        0o644,
        0o755,
    )


async def test_a_file_the_user_made_keeps_its_mode(tmp_path: Path) -> None:
    db = tmp_path / "mine.db"
    db.touch(mode=0o644)
    os.chmod(db, 0o644)
    await _record(f"sqlite:///{db}")
    assert _mode(db) == 0o644


@pytest.mark.parametrize("mode", ["0400", "rw", "0o1777", "888"])
async def test_a_bad_file_mode_is_a_config_error(tmp_path: Path, mode: str) -> None:
    with pytest.raises(ConfigError, match="file_mode"):
        await open_log(f"sqlite:///{tmp_path / 'log.db'}?file_mode={mode}")
    with pytest.raises(ConfigError, match="file_mode"):
        open_archive(f"file://{tmp_path / 'a'}?file_mode={mode}")
    assert not (tmp_path / "log.db").exists()
