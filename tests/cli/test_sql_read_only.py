"""`agentlog sql`: durations in seconds in every format, and read-only over its views."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from agentlog.archive import ArchiveQueryError, LocalArchiveStore, open_sql
from agentlog.cli import app
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.archive.helpers import record_run

runner = CliRunner()


@pytest.fixture
def opts(tmp_path: Path) -> list[str]:
    """A hot log with a finished run ``a`` archived and a parked run ``w`` still hot."""

    async def seed() -> None:
        log = SqliteEventLog(tmp_path / "hot.db")
        await record_run(log, "a", tag=1)
        await record_run(log, "w", tag=2, end=None)
        await log.close()

    asyncio.run(seed())
    found = [
        "--log",
        f"sqlite:///{tmp_path / 'hot.db'}",
        "--archive",
        f"file://{tmp_path / 'arch'}",
    ]
    archived = runner.invoke(app, ["archive", "--run", "a", *found])
    assert archived.exit_code == 0, archived.output
    return found


@pytest.mark.process
def test_durations_are_seconds_in_csv_json_and_parquet(opts: list[str], tmp_path: Path) -> None:
    query = (
        "SELECT r.run_id, r.duration, i.waited FROM runs r "
        "LEFT JOIN interrupts i USING (run_id) ORDER BY r.run_id"
    )
    as_csv = runner.invoke(app, ["sql", query, "-f", "csv", *opts])
    assert as_csv.exit_code == 0, as_csv.output
    assert as_csv.stdout.splitlines()[0] == '"run_id","duration","waited"'
    as_json = runner.invoke(app, ["sql", query, "--json", *opts])
    assert as_json.exit_code == 0, as_json.output
    rows = json.loads(as_json.stdout)
    assert [r["run_id"] for r in rows] == ["a", "w"]
    assert isinstance(rows[0]["duration"], float) and rows[0]["duration"] > 0
    assert rows[1]["duration"] is None  # still running: no end yet
    out = tmp_path / "d.parquet"
    as_parquet = runner.invoke(app, ["sql", query, "-f", "parquet", "-o", str(out), *opts])
    assert as_parquet.exit_code == 0, as_parquet.output
    table = pq.read_table(out)
    assert str(table.schema.field("duration").type) == "double"
    assert str(table.schema.field("waited").type) == "double"
    shown = runner.invoke(app, ["sql", query, *opts])
    assert shown.exit_code == 0 and "MonthDayNano" not in shown.stdout


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("COPY (SELECT * FROM events) TO '{dir}/stolen.csv'", "COPY statements are not allowed"),
        ("ATTACH '{dir}/other.db' AS other", "ATTACH statements are not allowed"),
        ("CREATE TABLE t AS SELECT 1", "CREATE statements are not allowed"),
        ("DROP VIEW runs", "DROP statements are not allowed"),
        ("SET enable_external_access = true", "SET statements are not allowed"),
        ("SELECT * FROM read_csv('{dir}/secret.csv')", "secret.csv"),
        ("SELECT 1; COPY (SELECT 1) TO '{dir}/stolen.csv'", "COPY statements are not allowed"),
        ("", "the statement is empty"),
        ("  ;  ", "the statement is empty"),
    ],
)
@pytest.mark.process
def test_sql_is_read_only(opts: list[str], tmp_path: Path, query: str, said: str) -> None:
    (tmp_path / "secret.csv").write_text("password\nhunter2\n")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    result = runner.invoke(app, ["sql", query.format(dir=tmp_path), *opts])
    assert result.exit_code == 2, result.output
    assert said in result.output and "hunter2" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing was written
    still = runner.invoke(app, ["sql", "SELECT count(*) AS n FROM runs", "--json", *opts])
    assert json.loads(still.stdout) == [{"n": 2}]


def test_the_library_connection_is_read_only_too(opts: list[str], tmp_path: Path) -> None:
    """open_sql's connection reads the archive's own files but no other file."""

    async def go() -> None:
        async with SqliteEventLog(tmp_path / "hot.db") as hot:
            store = LocalArchiveStore(tmp_path / "arch")
            with await open_sql(store, hot) as db:
                assert db.archived_files == 1
                assert db.sql("SELECT count(*) FROM events WHERE run_id = 'a'").fetchone()[0] > 0
                with pytest.raises(ArchiveQueryError, match="COPY statements are not allowed"):
                    db.sql(f"COPY (SELECT 1) TO '{tmp_path}/x.csv'")
                with pytest.raises(ArchiveQueryError, match="Permission"):
                    db.sql(f"SELECT * FROM read_text('{tmp_path}/hot.db')")

    asyncio.run(go())
    assert not (tmp_path / "x.csv").exists()
