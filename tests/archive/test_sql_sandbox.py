"""The SQL sandbox's disk and memory: no spilling (so no decrypted payload on
disk), no file readable but the archive's own, and a bound on the bytes a
result's first rows may hold.

The keyed tests run with the working directory in the test's temporary
folder: DuckDB's default temporary directory is ``<cwd>/.tmp``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentlog.archive import ArchiveQueryError, Archiver, LocalArchiveStore, open_sql
from agentlog.archive._errors import SqlLimitError
from agentlog.cli import app
from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.archive.test_encryption import CANARY, record
from tests.support.archive import NOW

#: Sorting 600,000 rows of decrypted payloads under 64 MB: DuckDB would spill
#: them to its temporary directory (with one thread, it does on DuckDB 1.5.5).
SPILLING = (
    "SELECT payload_json || repeat('p', 200) || range AS j "
    "FROM events, range(100000) ORDER BY hash(range, seq)"
)


def files_with_canary(root: Path) -> list[str]:
    """Every file under ``root`` whose bytes hold the canary in clear."""
    return [str(p) for p in root.rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()]


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's folder as the working directory (where DuckDB would put ``.tmp``)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
async def sealed_hot(in_tmp: Path) -> AsyncIterator[SqliteEventLog]:
    """A SQLite hot log that seals payloads with a keyring of the test's folder."""
    cipher = PayloadCipher(LocalKeyStore(in_tmp / "keyring.json"))
    log = SqliteEventLog(in_tmp / "hot.db", cipher=cipher)
    try:
        yield log
    finally:
        await log.close()


async def test_a_keyed_query_past_its_memory_limit_writes_no_plaintext(
    in_tmp: Path, sealed_hot: SqliteEventLog
) -> None:
    store = LocalArchiveStore(in_tmp / "archive")
    await record(sealed_hot, "enc")
    await Archiver(sealed_hot, store).run(now=NOW)
    assert not files_with_canary(in_tmp)
    with await open_sql(store, sealed_hot, memory_limit="64MB", threads=1) as db:
        opened = db.head("SELECT payload_json FROM events WHERE type = 'RunStarted'", 1)[0]
        assert CANARY in opened.column(0)[0].as_py()  # the keys do open it
        try:
            outcome: object = db.head(SPILLING, 1)
        except SqlLimitError as exc:
            outcome = exc
        # Looked at while the connection (and whatever it spilled) is still open.
        leaked = files_with_canary(in_tmp)
        assert not leaked, f"decrypted payloads were written to disk: {leaked}"
        assert not (in_tmp / ".tmp").exists()
    assert isinstance(outcome, SqlLimitError), f"expected the memory limit, got {outcome!r}"
    assert outcome.limit == "memory"
    message = str(outcome)
    assert "limit of 64MB" in message
    assert "--sql-memory-limit" in message and "--memory-limit" in message
    assert "never spills" in message


async def test_only_the_archives_files_are_readable(
    in_tmp: Path, sealed_hot: SqliteEventLog
) -> None:
    """DuckDB allows its temporary directory (``.tmp``) even with external access off."""
    store = LocalArchiveStore(in_tmp / "archive")
    await record(sealed_hot, "enc")
    await Archiver(sealed_hot, store).run(now=NOW)
    (in_tmp / ".tmp").mkdir()
    (in_tmp / ".tmp" / "other.txt").write_text("not-for-sql-7c1d")
    (in_tmp / "beside.txt").write_text("not-for-sql-7c1d")
    archived = sorted(str(p) for p in (in_tmp / "archive").rglob("*.parquet"))
    assert archived
    with await open_sql(store, sealed_hot) as db:
        for path in (".tmp/**", ".tmp/other.txt", str(in_tmp / ".tmp" / "other.txt"), "*.txt"):
            with pytest.raises(ArchiveQueryError, match="Permission") as caught:
                db.head(f"SELECT content FROM read_text('{path}')", 10)
            assert "not-for-sql-7c1d" not in str(caught.value), path
        # The archive's own files stay readable, through the views and by name.
        assert db.head("SELECT count(*) FROM events", 1)[0].column(0)[0].as_py() == 6
        named = db.head(f"SELECT count(*) FROM read_parquet('{archived[0]}')", 1)[0]
        assert named.column(0)[0].as_py() == 6


async def test_a_result_whose_first_rows_hold_too_many_bytes_is_stopped(
    in_tmp: Path, sealed_hot: SqliteEventLog
) -> None:
    with await open_sql(None, sealed_hot, memory_limit="256MB") as db:
        with pytest.raises(SqlLimitError) as caught:
            db.head("SELECT repeat('x', 100000) AS s FROM range(1001)", 1000, max_bytes=1_000_000)
        assert caught.value.limit == "result"
        assert "1,000,000 bytes" in str(caught.value) and "--sql-max-result" in str(caught.value)
        # Under the bound, and without one, the same rows read as before.
        small = "SELECT repeat('x', 100) AS s FROM range(1001)"
        table, more = db.head(small, 1000, max_bytes=10**6)
        assert table.num_rows == 1000 and more
        assert db.head("SELECT repeat('x', 100000) FROM range(20)", 1000)[0].num_rows == 20


@pytest.mark.process
def test_agentlog_sql_with_keys_past_its_memory_limit_fails_and_writes_nothing(
    in_tmp: Path,
) -> None:
    async def seed() -> None:
        cipher = PayloadCipher(LocalKeyStore(in_tmp / "keyring.json"))
        async with SqliteEventLog(in_tmp / "hot.db", cipher=cipher) as log:
            await record(log, "enc")

    asyncio.run(seed())
    opts = ["--log", f"sqlite:///{in_tmp / 'hot.db'}", "--archive", f"file://{in_tmp / 'a'}"]
    env = {"AGENTLOG_KEYRING": str(in_tmp / "keyring.json")}
    runner = CliRunner()
    answer = runner.invoke(app, ["sql", SPILLING, "--memory-limit", "64MB", *opts], env=env)
    assert answer.exit_code == 2, answer.output
    assert "limit of 64MB" in answer.output and "--memory-limit" in answer.output
    assert CANARY not in answer.output
    assert not files_with_canary(in_tmp) and not (in_tmp / ".tmp").exists()
    bad = runner.invoke(app, ["sql", "SELECT 1", "--memory-limit", "lots", *opts], env=env)
    assert bad.exit_code == 2 and "--memory-limit 'lots'" in bad.output
    fine = runner.invoke(app, ["sql", "SELECT 1 AS n", "--json", "--memory-limit", "1GB", *opts])
    assert fine.exit_code == 0 and '"n": 1' in fine.stdout, fine.output
