"""A SQLite log opened on an existing file opens its writing connection at its
first write (issue 23 item 8): a process that opens a log to read it opens
one connection to the file, as LangGraph's SqliteSaver does, and leaves the
file as it found it (no -wal or -shm beside it).

Counted, not timed: the file descriptors this process holds on the file.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from agentlog.errors import BackendUnavailableError
from agentlog.eventlog import Event, RunStarted, TaskCompleted
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.eventlog.sqlite._schema import MIGRATIONS


def held(path: Path) -> int:
    """How many descriptors of this process are open on ``path`` itself."""
    target = os.path.realpath(path)
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == target:
                count += 1
        except OSError:
            continue
    return count


def _files(folder: Path) -> list[str]:
    """The names of the files in ``folder``."""
    return sorted(os.listdir(folder))


async def _written(path: Path) -> None:
    log = SqliteEventLog(path)
    try:
        await log.append([Event("r", 1, RunStarted("w", "1", {}, "sync", "fp", start=["s"]))])
    finally:
        await log.close()


async def test_a_log_opened_to_read_opens_one_connection(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    await _written(path)
    log = SqliteEventLog(path)
    try:
        assert held(path) == 1
        assert [e.seq async for e in log.read("r")] == [1]
        assert (await log.find_run("r")) is not None
        assert held(path) == 1
        await log.append([Event("r", 2, TaskCompleted("k", 1))])
        assert held(path) == 2  # the writer's, opened by the first write
        assert [e.seq async for e in log.read("r")] == [1, 2]
    finally:
        await log.close()
    assert held(path) == 0
    assert _files(tmp_path) == ["log.db"]


async def test_a_log_only_read_leaves_no_wal_beside_the_file(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    await _written(path)
    log = SqliteEventLog(path)
    try:
        assert [e.seq async for e in log.read("r")] == [1]
    finally:
        await log.close()
    assert _files(tmp_path) == ["log.db"]


async def test_a_file_of_a_newer_schema_is_refused_at_open(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    await _written(path)
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    conn.close()
    with pytest.raises(BackendUnavailableError, match="newer than this agentlog"):
        SqliteEventLog(path)
    assert held(path) == 0


async def test_a_file_of_an_older_schema_is_migrated_at_open(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    conn = sqlite3.connect(path)
    for statement in MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    log = SqliteEventLog(path)
    try:
        await log.append([Event("r", 1, RunStarted("w", "1", {}, "sync", "fp", start=["s"]))])
        assert [e.seq async for e in log.read("r")] == [1]
    finally:
        await log.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    conn.close()


async def test_a_read_only_log_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    await _written(path)
    log = SqliteEventLog(path, read_only=True)
    try:
        assert log.read_only
        assert [e.seq async for e in log.read("r")] == [1]
        with pytest.raises(BackendUnavailableError, match="read-only"):
            await log.append([Event("r", 2, TaskCompleted("k", 1))])
    finally:
        await log.close()


async def test_a_file_named_by_a_relative_path_is_opened_writable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writable check looks at the file and its folder: for a bare file
    name, the current directory."""
    monkeypatch.chdir(tmp_path)
    await _written(Path("log.db"))
    log = SqliteEventLog("log.db")
    try:
        assert not log.read_only
        await log.append([Event("r", 2, TaskCompleted("k", 1))])
        assert [e.seq async for e in log.read("r")] == [1, 2]
    finally:
        await log.close()
