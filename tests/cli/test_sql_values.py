"""`agentlog sql` shows values Python cannot hold as DuckDB's text, not an error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentlog.cli import app

runner = CliRunner()

#: A query, and the text DuckDB writes for its value (Python's date and
#: datetime cannot hold it: infinity, the year 10000, nanoseconds).
UNREPRESENTABLE = (
    ("SELECT 'infinity'::date AS v", "infinity"),
    ("SELECT '-infinity'::timestamptz AS v", "-infinity"),
    ("SELECT '9999-12-31'::timestamp + INTERVAL 1 DAY AS v", "10000-01-01 00:00:00"),
    ("SELECT TIMESTAMP_NS '2020-01-01 00:00:00.123456789' AS v", "2020-01-01 00:00:00.123456789"),
)


@pytest.fixture
def opts(tmp_path: Path) -> list[str]:
    """No hot log where the default says, and an empty archive folder: views only."""
    return ["--archive", f"file://{tmp_path / 'arch'}"]


@pytest.mark.process
@pytest.mark.parametrize(("query", "text"), UNREPRESENTABLE)
def test_a_value_python_cannot_hold_is_shown_as_duckdbs_text(
    query: str, text: str, opts: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    as_json = runner.invoke(app, ["sql", query + ", 1 AS n", "--json", *opts])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout) == [{"v": text, "n": 1}]
    as_table = runner.invoke(app, ["sql", query, *opts])
    assert as_table.exit_code == 0, as_table.output
    assert text in as_table.stdout


@pytest.mark.process
def test_a_column_mixing_plain_and_unrepresentable_values_keeps_the_plain_ones(
    opts: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    query = "SELECT * FROM (VALUES ('2024-02-03'::date), ('infinity'::date), (NULL)) t(d)"
    answer = runner.invoke(app, ["sql", query, "--json", *opts])
    assert answer.exit_code == 0, answer.output
    assert json.loads(answer.stdout) == [{"d": "2024-02-03"}, {"d": "infinity"}, {"d": None}]
