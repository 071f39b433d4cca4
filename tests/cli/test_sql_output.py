"""`agentlog sql`'s output: nested values in CSV, one statement per query, a
line for a file written, and DuckDB's caret kept under the query."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from agentlog.archive import ArchiveQueryError, LocalArchiveStore, open_sql
from agentlog.cli import app
from tests.support.lg_threads import run_thread

runner = CliRunner()


@pytest.fixture
def lg_opts(tmp_path: Path) -> list[str]:
    """A hot log holding one finished LangGraph thread ``t1``."""
    db = tmp_path / "lg.db"
    run_thread(db, "t1", answer=True)
    return ["--log", f"sqlite:///{db}", "--archive", f"file://{tmp_path / 'arch'}"]


def csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.mark.process
def test_csv_writes_the_checkpoints_lists_as_json_text(lg_opts: list[str]) -> None:
    answer = runner.invoke(
        app, ["sql", "SELECT * FROM checkpoints ORDER BY seq", "-f", "csv", *lg_opts]
    )
    assert answer.exit_code == 0, answer.output
    rows = csv_rows(answer.stdout)
    assert len(rows) == 4
    channels = [json.loads(r["channels"]) for r in rows]
    assert all(isinstance(c, list) for c in channels), channels
    assert any("notes" in c for c in channels), channels
    assert [r["removed"] for r in rows] == ["false"] * 4


@pytest.mark.process
def test_csv_writes_structs_maps_and_intervals_as_text(lg_opts: list[str], tmp_path: Path) -> None:
    query = (
        "SELECT [1, 2] AS l, {'a': 1, 'b': ['x']} AS s, MAP {'k': 3} AS m, "
        "INTERVAL 2 DAY AS gap, NULL::INT[] AS none, 7 AS n"
    )
    out = tmp_path / "rows.csv"
    for args in ([], ["-o", str(out)]):
        answer = runner.invoke(app, ["sql", query, "-f", "csv", *args, *lg_opts])
        assert answer.exit_code == 0, answer.output
        text = out.read_text() if args else answer.stdout
        (row,) = csv_rows(text)
        assert json.loads(row["l"]) == [1, 2]
        assert json.loads(row["s"]) == {"a": 1, "b": ["x"]}
        assert json.loads(row["m"]) == {"k": 3}
        assert row["gap"] == "2 days" and row["none"] == "" and row["n"] == "7"
        assert text.splitlines()[1].endswith(",,7")  # numbers stay unquoted


@pytest.mark.process
def test_a_second_statement_is_refused_not_run(lg_opts: list[str], tmp_path: Path) -> None:
    answer = runner.invoke(app, ["sql", "SELECT 1 AS a; SELECT 2 AS b", "--json", *lg_opts])
    assert answer.exit_code == 2, answer.output
    assert answer.stdout == ""  # neither statement's rows
    assert "2 statements" in answer.stderr and "one at a time" in answer.stderr, answer.stderr
    # One statement with a trailing `;` is one statement.
    one = runner.invoke(app, ["sql", "SELECT 2 AS b;", "--json", *lg_opts])
    assert one.exit_code == 0 and json.loads(one.stdout) == [{"b": 2}], one.output


async def test_open_sql_refuses_a_second_statement(tmp_path: Path) -> None:
    with await open_sql(LocalArchiveStore(tmp_path / "arch"), None) as db:
        with pytest.raises(ArchiveQueryError, match="3 statements"):
            db.arrow("SELECT 1; SELECT 2; SELECT 3")
        assert db.arrow("SELECT 3 AS c").to_pylist() == [{"c": 3}]


@pytest.mark.process
def test_each_file_written_is_said_on_one_line(lg_opts: list[str], tmp_path: Path) -> None:
    query = "SELECT seq FROM events WHERE run_id = 't1' ORDER BY seq"
    events = runner.invoke(app, ["sql", "SELECT count(*) AS n FROM events", "--json", *lg_opts])
    count = json.loads(events.stdout)[0]["n"]
    for fmt in ("parquet", "csv", "json", "table"):
        out = tmp_path / f"seqs.{fmt}"
        answer = runner.invoke(app, ["sql", query, "-f", fmt, "-o", str(out), *lg_opts])
        assert answer.exit_code == 0, answer.output
        assert answer.stdout == f"wrote {count:,} rows ({fmt}) to {out}\n"
        assert out.exists()
    assert pq.read_table(tmp_path / "seqs.parquet").num_rows == count
    one = runner.invoke(app, ["sql", "SELECT 1 AS n", "-f", "parquet", "-o", str(out), *lg_opts])
    assert one.stdout == f"wrote 1 row (parquet) to {out}\n"


@pytest.mark.process
def test_duckdbs_caret_stays_under_the_error(lg_opts: list[str]) -> None:
    answer = runner.invoke(app, ["sql", "SELECT * FORM events", *lg_opts])
    assert answer.exit_code == 2, answer.output
    lines = answer.stderr.splitlines()
    quoted = next(i for i, line in enumerate(lines) if line.startswith("LINE 1: "))
    caret = lines[quoted + 1]
    assert caret.strip() == "^", lines
    assert caret.index("^") == lines[quoted].index("events"), lines
    assert lines[quoted + 2].startswith("The views you can query are: events"), lines
