"""SQLite-specific failure modes: bad bytes in the file, unusable files, bad URLs."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import pytest

from agentlog.errors import (
    BackendUnavailableError,
    ConfigError,
    CorruptEventError,
    UnknownEventTypeError,
)
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.codec import row_checksum
from agentlog.eventlog.events import Event, RunCompleted, TaskCompleted
from agentlog.eventlog.sqlite._log import MIGRATIONS, SqliteEventLog


def ev(run_id: str, seq: int) -> Event:
    return Event(run_id, seq, TaskCompleted(key=f"k{seq}", result={"n": seq}))


async def read_all(log: SqliteEventLog, run_id: str) -> list[Event]:
    return [event async for event in log.read(run_id)]


@pytest.fixture
async def log(log_path: Path) -> AsyncIterator[SqliteEventLog]:
    async with SqliteEventLog(log_path) as log:
        await log.append([ev("a", seq) for seq in (1, 2, 3)])
        await log.append([ev("b", seq) for seq in (1, 2)])
        yield log


def tamper(path: Path, sql: str, *params: object) -> None:
    """Change a row behind agentlog's back, as a newer agentlog or another tool would.

    The row's checksum is recomputed, so what the read sees is the changed
    content itself (a flipped byte under a stale checksum is
    tests/eventlog/test_storage_integrity.py).
    """
    with closing(sqlite3.connect(path)) as conn, conn:
        assert conn.execute(sql, params).rowcount == 1
        for row in conn.execute(
            "SELECT run_id, seq, type, ts, schema_v, writer_epoch, payload FROM events"
        ).fetchall():
            conn.execute(
                "UPDATE events SET checksum = ? WHERE run_id = ? AND seq = ?",
                (row_checksum(*row), row[0], row[1]),
            )


def stored(path: Path, run_id: str, seq: int) -> tuple[str, bytes]:
    with closing(sqlite3.connect(path)) as conn:
        row = conn.execute(
            "SELECT type, payload FROM events WHERE run_id = ? AND seq = ?", (run_id, seq)
        ).fetchone()
    assert row is not None
    return row[0], row[1]


async def test_corrupt_payload_names_run_and_seq_and_is_kept(
    log: SqliteEventLog, log_path: Path
) -> None:
    bad = b"\xc1\x00garbage"  # 0xc1 is never used by msgpack
    tamper(log_path, "UPDATE events SET payload = ? WHERE run_id = 'a' AND seq = 2", bad)
    seen: list[int] = []
    with pytest.raises(CorruptEventError) as caught:
        async for event in log.read("a"):
            seen.append(event.seq)
    assert (caught.value.run_id, caught.value.seq) == ("a", 2)
    assert "'a'" in str(caught.value) and "seq 2" in str(caught.value)
    assert seen == [1]  # the good events before it still arrive, in order
    assert [e.seq for e in await read_all(log, "b")] == [1, 2]
    assert [e.seq async for e in log.read("a", after_seq=2)] == [3]
    assert stored(log_path, "a", 2) == ("TaskCompleted", bad)


async def test_payload_that_does_not_fit_its_type_is_corrupt(
    log: SqliteEventLog, log_path: Path
) -> None:
    tamper(log_path, "UPDATE events SET type = 'RunCompleted' WHERE run_id = 'a' AND seq = 3")
    with pytest.raises(CorruptEventError) as caught:
        await read_all(log, "a")
    assert caught.value.seq == 3


async def test_unknown_event_type(log: SqliteEventLog, log_path: Path) -> None:
    tamper(log_path, "UPDATE events SET type = 'FromTheFuture' WHERE run_id = 'b' AND seq = 1")
    with pytest.raises(UnknownEventTypeError) as caught:
        await read_all(log, "b")
    assert (caught.value.run_id, caught.value.seq) == ("b", 1)
    assert "FromTheFuture" in str(caught.value)
    assert len(await read_all(log, "a")) == 3
    assert stored(log_path, "b", 1)[0] == "FromTheFuture"


async def test_newer_schema_version_is_corrupt_not_guessed(
    log: SqliteEventLog, log_path: Path
) -> None:
    tamper(log_path, "UPDATE events SET schema_v = 99 WHERE run_id = 'b' AND seq = 2")
    with pytest.raises(CorruptEventError) as caught:
        await read_all(log, "b")
    assert caught.value.seq == 2


async def test_read_only_log_refuses_writes_and_changes_nothing(log_path: Path) -> None:
    async with SqliteEventLog(log_path) as log:
        await log.append([ev("a", 1), ev("a", 2)])
        before = await read_all(log, "a")
    async with SqliteEventLog(log_path, read_only=True) as reader:
        assert await read_all(reader, "a") == before
        with pytest.raises(BackendUnavailableError) as caught:
            await reader.append([ev("a", 3)])
        assert str(log_path) in str(caught.value)
        with pytest.raises(BackendUnavailableError):
            await reader.claim_writer("a")
    async with SqliteEventLog(log_path) as log:
        assert await read_all(log, "a") == before


async def test_read_only_connection_below_agentlog_is_translated(log_path: Path) -> None:
    """The file itself cannot be written: sqlite says SQLITE_READONLY mid-append."""
    async with SqliteEventLog(log_path) as log:
        await log.append([ev("a", 1)])
        await log._call(log._conn.execute, "PRAGMA query_only = ON")
        with pytest.raises(BackendUnavailableError) as caught:
            await log.append([ev("a", 2)])
        assert "read-only" in str(caught.value) or "readonly" in str(caught.value)
        await log._call(log._conn.execute, "PRAGMA query_only = OFF")
        assert [e.seq for e in await read_all(log, "a")] == [1]


def test_directory_that_cannot_exist(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"not a directory")
    with pytest.raises(BackendUnavailableError) as caught:
        SqliteEventLog(blocker / "sub" / "agentlog.db")
    assert "a-file" in str(caught.value)
    assert not caught.value.retryable
    assert blocker.read_bytes() == b"not a directory"


def test_path_that_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailableError) as caught:
        SqliteEventLog(tmp_path)
    assert str(tmp_path) in str(caught.value)


def test_not_a_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    content = b"these are my notes, not a database\n" * 200
    path.write_bytes(content)
    with pytest.raises(BackendUnavailableError) as caught:
        SqliteEventLog(path)
    assert "notes.db" in str(caught.value)
    assert "not an SQLite database" in str(caught.value)
    assert path.read_bytes() == content


def test_file_from_a_newer_agentlog_is_refused(log_path: Path) -> None:
    with closing(sqlite3.connect(log_path)) as conn:
        conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    with pytest.raises(BackendUnavailableError, match="upgrade agentlog"):
        SqliteEventLog(log_path)


async def test_schema_version_is_recorded_and_reopening_keeps_data(log_path: Path) -> None:
    async with SqliteEventLog(log_path) as log:
        await log.append([ev("a", 1)])
    with closing(sqlite3.connect(log_path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    async with SqliteEventLog(log_path) as log:
        assert [e.seq for e in await read_all(log, "a")] == [1]


async def test_busy_file_gives_a_retryable_error_and_writes_nothing(log_path: Path) -> None:
    async with SqliteEventLog(log_path, busy_timeout=0.05) as log:
        await log.append([ev("a", 1)])
        holder = sqlite3.connect(log_path, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")  # another process's write lock
            with pytest.raises(BackendUnavailableError) as caught:
                await log.append([ev("a", 2)])
            assert caught.value.retryable
            assert "retry" in str(caught.value)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        await log.append([ev("a", 2)])  # the same call succeeds once the lock is gone
        assert [e.seq for e in await read_all(log, "a")] == [1, 2]


async def test_durable_flag_sets_the_synchronous_pragma(log_path: Path) -> None:
    def synchronous() -> int:
        return int(log._conn.execute("PRAGMA synchronous").fetchone()[0])

    async with SqliteEventLog(log_path) as log:
        await log.append([ev("a", 1)], durable=True)
        assert await log._call(synchronous) == 2  # FULL
        await log.append([ev("a", 2)], durable=False)
        assert await log._call(synchronous) == 1  # NORMAL


async def test_closed_log_says_so(log_path: Path) -> None:
    log = SqliteEventLog(log_path)
    await log.close()
    await log.close()  # twice is fine
    with pytest.raises(BackendUnavailableError, match="closed"):
        await log.append([ev("a", 1)])


async def test_url_opens_the_sqlite_backend(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "log.db"
    log = await open_log(f"sqlite:///{path}")
    try:
        assert isinstance(log, SqliteEventLog)
        assert log.url == f"sqlite:///{path}"
        await log.append([Event("r", 1, RunCompleted())])
    finally:
        await log.close()
    assert path.exists()


@pytest.mark.parametrize(
    "url",
    ["sqlite://", "sqlite:///", "sqlite://relative.db", "mysql://h/db", "kafka://", "notaurl"],
)
async def test_bad_urls(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        await open_log(url)
    assert url in str(caught.value)
