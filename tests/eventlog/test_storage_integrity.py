"""Damaged storage is never read as a wrong state: checksums, gaps, old files, odd bounds.

Each test damages a real SQLite file with raw sqlite3, as a disk fault or a
careless tool would, and asserts the typed error or the fallback.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import pytest

from agentlog.errors import ConfigError, CorruptEventError
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.codec import pack, row_checksum
from agentlog.eventlog.events import (
    Event,
    RunStarted,
    StepCompleted,
    SuperstepCommitted,
    TaskCompleted,
)
from agentlog.eventlog.sqlite._log import MIGRATIONS, SqliteEventLog
from agentlog.projector import fold, load_state, save_state

RUN = "r1"


def run_events() -> list[Event]:
    payloads = [
        RunStarted("wf", "1", {}, "sync", "fp", {}, ["a"], {"notes": "append"}),
        TaskCompleted("k1", "MARKER-first", 1.0),
        StepCompleted("a", 0, 0, {"notes": ["one"]}, ["b"]),
        SuperstepCommitted(0, ["b"]),
        TaskCompleted("k2", "MARKER-final", 2.0),
        StepCompleted("b", 1, 0, {"notes": ["two"]}, []),
        SuperstepCommitted(1, []),
    ]
    return [Event(RUN, seq, data) for seq, data in enumerate(payloads, start=1)]


@pytest.fixture
async def log(log_path: Path) -> AsyncIterator[SqliteEventLog]:
    async with SqliteEventLog(log_path) as log:
        await log.append(run_events())
        yield log


def raw(path: Path, sql: str, *params: object) -> int:
    """Change the file behind agentlog's back; return the rows changed."""
    with closing(sqlite3.connect(path)) as conn, conn:
        return conn.execute(sql, params).rowcount


def flip(path: Path, table: str, column: str, seq: int, old: bytes, new: bytes) -> None:
    """Replace bytes inside one stored blob, leaving its checksum as it was."""
    with closing(sqlite3.connect(path)) as conn, conn:
        (blob,) = conn.execute(
            f"SELECT {column} FROM {table} WHERE run_id = ? AND seq = ?", (RUN, seq)
        ).fetchone()
        assert old in blob
        conn.execute(
            f"UPDATE {table} SET {column} = ? WHERE run_id = ? AND seq = ?",
            (blob.replace(old, new, 1), RUN, seq),
        )


async def read_all(log: SqliteEventLog, run_id: str = RUN) -> list[Event]:
    return [event async for event in log.read(run_id)]


# -- events ---------------------------------------------------------------------------


async def test_one_flipped_byte_in_a_stored_event_is_a_typed_error(
    log: SqliteEventLog, log_path: Path
) -> None:
    flip(log_path, "events", "payload", 5, b"MARKER", b"NARKER")
    with pytest.raises(CorruptEventError) as caught:
        await load_state(log, RUN)
    assert (caught.value.run_id, caught.value.seq) == (RUN, 5)
    assert "checksum" in caught.value.reason
    seen: list[int] = []
    with pytest.raises(CorruptEventError):
        async for event in log.read(RUN):
            seen.append(event.seq)
    assert seen == [1, 2, 3, 4]  # the good events before it still arrive


@pytest.mark.parametrize(
    ("column", "value"), [("ts", 12345), ("writer_epoch", 7), ("type", "TaskFailed")]
)
async def test_a_changed_envelope_column_fails_its_checksum(
    log: SqliteEventLog, log_path: Path, column: str, value: object
) -> None:
    assert raw(log_path, f"UPDATE events SET {column} = ? WHERE seq = 2", value) == 1
    with pytest.raises(CorruptEventError, match="checksum") as caught:
        await read_all(log)
    assert caught.value.seq == 2


@pytest.mark.parametrize("missing", [1, 4, 7])
async def test_a_missing_seq_is_a_corrupt_event_naming_it(
    log: SqliteEventLog, log_path: Path, missing: int
) -> None:
    assert raw(log_path, "DELETE FROM events WHERE seq = ?", missing) == 1
    with pytest.raises(CorruptEventError) as caught:
        await read_all(log)
    assert (caught.value.run_id, caught.value.seq) == (RUN, missing)
    assert f"seq {missing} is missing" in caught.value.reason
    with pytest.raises(CorruptEventError):
        await load_state(log, RUN, use_snapshots=False)


async def test_a_missing_seq_is_found_across_read_batches(log_path: Path) -> None:
    events = [Event(RUN, seq, TaskCompleted(f"k{seq}", seq)) for seq in range(1, 12)]
    async with SqliteEventLog(log_path, read_batch=3) as log:
        await log.append(events)
        assert await read_all(log) == events
        raw(log_path, "DELETE FROM events WHERE seq = 7")
        with pytest.raises(CorruptEventError) as caught:
            await read_all(log)
        assert caught.value.seq == 7


async def test_stored_writes_that_are_not_a_map_are_corrupt_naming_run_and_seq(
    log: SqliteEventLog, log_path: Path
) -> None:
    """As another tool (or a bug) might store them, with a valid checksum."""
    bad = pack({"step": "a", "superstep": 0, "branch": 0, "writes": ["one"], "goto": ["b"]})
    with closing(sqlite3.connect(log_path)) as conn, conn:
        row = conn.execute(
            "SELECT run_id, seq, type, ts, schema_v, writer_epoch FROM events WHERE seq = 3"
        ).fetchone()
        conn.execute(
            "UPDATE events SET payload = ?, checksum = ? WHERE seq = 3",
            (bad, row_checksum(*row, bad)),
        )
    with pytest.raises(CorruptEventError) as caught:
        await load_state(log, RUN)
    assert (caught.value.run_id, caught.value.seq) == (RUN, 3)
    assert "writes" in caught.value.reason


async def test_rows_from_before_checksums_still_read_and_new_rows_get_one(
    log_path: Path,
) -> None:
    """A file of schema version 1 migrates; its rows read unverified (no checksum)."""
    with closing(sqlite3.connect(log_path)) as conn, conn:
        for statement in MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 1")
        conn.execute(
            "INSERT INTO events VALUES (?,?,?,?,?,?,?)",
            (RUN, 1, "TaskCompleted", 0, 1, 0, pack({"key": "k", "result": "old"})),
        )
        conn.execute(
            "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (RUN, "", "", "running", 1, 0, None, 0, 0, "", None),
        )
    async with SqliteEventLog(log_path) as log:
        (old,) = await read_all(log)
        assert old.data == TaskCompleted("k", "old")
        info = await log.get_run(RUN)
        assert info.last_seq == 1 and not info.archived
        await log.append([Event(RUN, 2, TaskCompleted("k2", "new"))])
        assert [e.seq for e in await read_all(log)] == [1, 2]
    with closing(sqlite3.connect(log_path)) as conn:
        checksums = conn.execute("SELECT seq, checksum FROM events ORDER BY seq").fetchall()
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert checksums[0] == (1, None) and checksums[1][1] is not None


# -- snapshots --------------------------------------------------------------------------


async def test_a_corrupt_snapshot_falls_back_to_the_previous_one_then_to_the_events(
    log: SqliteEventLog, log_path: Path
) -> None:
    events = run_events()
    expected = fold(events).to_dict()
    await save_state(log, fold(events[:2]))
    await save_state(log, fold(events[:5]))
    flip(log_path, "snapshots", "state", 5, b"MARKER", b"NARKER")
    assert (await load_state(log, RUN)).to_dict() == expected
    assert (await load_state(log, RUN, at_seq=5)).to_dict() == fold(events[:5]).to_dict()
    flip(log_path, "snapshots", "state", 2, b"MARKER", b"NARKER")
    assert (await load_state(log, RUN)).to_dict() == expected
    assert (await load_state(log, RUN)).tasks["k2"]["result"] == "MARKER-final"


# -- opening -------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["x.db", "no/such/dir/x.db"])
async def test_open_log_without_create_never_creates_a_log(tmp_path: Path, where: str) -> None:
    path = tmp_path / where
    with pytest.raises(ConfigError, match="no log at") as caught:
        await open_log(f"sqlite:///{path}", create=False)
    assert str(path) in str(caught.value)
    assert await asyncio.to_thread(os.listdir, tmp_path) == []


async def test_open_log_without_create_opens_an_existing_log(log_path: Path) -> None:
    async with SqliteEventLog(log_path) as log:
        await log.append(run_events())
    async with await open_log(f"sqlite:///{log_path}", create=False) as log:
        assert len([e async for e in log.read(RUN)]) == 7


# -- bounds -----------------------------------------------------------------------------------


async def test_load_state_at_a_seq_beyond_64_bits_is_a_config_error(log: SqliteEventLog) -> None:
    with pytest.raises(ConfigError, match="no seq"):
        await load_state(log, RUN, at_seq=2**70)
    with pytest.raises(ConfigError):
        await load_state(log, RUN, at_seq="3")  # type: ignore[arg-type]


_READ_ONLY_CHILD = """
import asyncio, sys
from agentlog.errors import BackendUnavailableError
from agentlog.eventlog.events import Event, RunCompleted
from agentlog.eventlog._urls import open_log

async def main():
    async with await open_log(sys.argv[1], create=False) as log:
        seqs = [e.seq async for e in log.read("r1")]
        try:
            await log.append([Event("r1", len(seqs) + 1, RunCompleted())])
        except BackendUnavailableError:
            print("write refused", seqs)

asyncio.run(main())
"""


@pytest.mark.process
async def test_a_log_on_a_read_only_filesystem_is_still_readable(log_path: Path) -> None:
    """The folder is bind-mounted read-only in a private mount namespace of the child."""

    async with SqliteEventLog(log_path) as log:
        await log.append(run_events())
    folder = str(log_path.parent)
    unshare = shutil.which("unshare")
    # Never skipped: CI and the development machines run as root, with util-linux.
    assert os.geteuid() == 0 and unshare is not None, (
        "this test needs root and unshare(1) to mount a read-only filesystem"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    script = (
        f'mount --bind -o ro "{folder}" "{folder}" && '
        f'touch "{folder}/probe" 2>/dev/null && exit 3; '
        f'exec "{sys.executable}" -c "$0" "sqlite:///{log_path}"'
    )
    done = await asyncio.to_thread(
        subprocess.run,
        [unshare, "-m", "sh", "-c", script, _READ_ONLY_CHILD],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "write refused [1, 2, 3, 4, 5, 6, 7]"
    assert await asyncio.to_thread(os.listdir, folder) == [log_path.name]


def test_a_corrupt_event_error_always_says_why() -> None:
    for reason in ("", "   "):
        error = CorruptEventError("r", 1, reason)
        assert error.reason.strip()
        assert "corrupt event: ." not in str(error)
