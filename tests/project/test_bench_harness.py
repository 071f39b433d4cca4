"""The benchmark harness says what it measured: n=1 for one sample, pinned durability,
the physical floor, cold and warm apart, and a generated SQL set.

These pin the harness's logic (``benchmarks/harness.py``, ``floor.py``,
``durability.py``, ``peer_dbos.py``, the projector's and the archive's row
making), never a timing: every figure here is checked for its shape, its
count of samples or the settings it ran with.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from benchmarks import bench_archive, bench_projector, bench_runtime, durability
from benchmarks.floor import Floors, floor_ratios
from benchmarks.harness import COLUMNS, Row, row_from_samples, table_cells
from benchmarks.peer_dbos import JOURNAL_MODES, dbos_loop

from agentlog.archive import open_sql


def _cell(row: Row, column: str) -> str:
    return table_cells(row)[COLUMNS.index(column)]


def test_a_row_from_one_sample_says_n1_where_a_p99_would_be() -> None:
    row = row_from_samples("a", "once", [0.002])
    assert row.p99 is None and row.n == 1
    assert _cell(row, "p99") == "n=1" and _cell(row, "median") == "2.000"


def test_a_row_from_many_samples_shows_its_p99_and_its_count() -> None:
    row = row_from_samples("a", "many", [0.001 * i for i in range(1, 101)], unit="us")
    assert row.n == 100 and row.p99 == pytest.approx(99_000)
    assert _cell(row, "p99") == "99,000" and _cell(row, "n") == "100"


def test_a_row_made_directly_from_one_figure_says_n1_too() -> None:
    row = Row("a", "bytes", "MB", 2.5, None, {"vs_peer": 1.5}, n=1)
    assert _cell(row, "p99") == "n=1" and _cell(row, "details") == "vs_peer=1.500"


def test_no_samples_is_refused_with_the_rows_name() -> None:
    with pytest.raises(ValueError, match="a/empty: no samples"):
        row_from_samples("a", "empty", [])


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_pin_sqlite_sets_and_reads_back_the_durability(tmp_path: Path, journal: str) -> None:
    conn = sqlite3.connect(tmp_path / "x.db")
    try:
        conn.execute("PRAGMA synchronous=OFF")  # whatever the connection had before
        got = durability.pin_sqlite(conn, journal)
        assert got == f"journal_mode={journal}, synchronous=FULL"
        assert durability.sqlite_settings(conn) == got
    finally:
        conn.close()
    assert durability.file_journal_mode(tmp_path / "x.db") == journal


def test_the_floors_are_measured_in_wal_full_and_rows_carry_ratios_to_them(
    tmp_path: Path,
) -> None:
    floors = Floors("area", tmp_path, 7)
    assert [row.n for row in floors.rows] == [7, 7]
    assert durability.file_journal_mode(tmp_path / "floor.db") == "wal"
    assert (tmp_path / "floor.bin").stat().st_size == 16 * (7 + 5)  # warm-up, then timed
    assert set(floors.ratios([0.01])) == {"x_sqlite_floor", "x_fsync_floor"}
    assert floor_ratios(0.004, [0.001, 0.002, 0.003], [0.004]) == {
        "x_sqlite_floor": 2.0,
        "x_fsync_floor": 1.0,
    }


@pytest.mark.process  # DBOS runs `file -b` on the interpreter at start (platform.architecture)
@pytest.mark.parametrize("journal", JOURNAL_MODES)
def test_dbos_runs_with_the_journal_mode_pinned_and_synchronous_full(
    tmp_path: Path, journal: str
) -> None:
    seconds, settings = dbos_loop(bench_runtime.conversation(3), tmp_path / "d.sqlite", journal)
    assert seconds > 0
    assert settings == f"journal_mode={journal}, synchronous=FULL"
    assert durability.file_journal_mode(tmp_path / "d.sqlite") == journal


def test_sqlitesaver_in_the_runtime_comparison_runs_pinned() -> None:
    _seconds, nbytes, settings = bench_runtime._langgraph_loop(3, "sync")
    assert nbytes > 0 and settings == "journal_mode=wal, synchronous=FULL"


def test_resume_rows_keep_cold_and_warm_apart() -> None:
    result = {"open": [0.001], "cold": [0.004], "warm": [0.001, 0.002, 0.003], "rss_mb": 30.0}
    cold, warm = bench_projector.load_rows(1000, "snapshot + tail", result)
    assert cold.name.endswith("cold (new EventLog instance, first load)") and cold.n == 1
    assert table_cells(cold)[COLUMNS.index("p99")] == "n=1"
    assert warm.name.endswith("warm (same instance)") and warm.n == 3
    assert warm.extra["x_cold"] == 2.0 and cold.extra["first_in_process_ms"] == 4.0


def test_the_sql_set_is_generated_not_copied(tmp_path: Path) -> None:
    runs = 24
    store, target = asyncio.run(bench_archive._generated_archive(tmp_path, runs * 100))
    lengths = [bench_archive.run_length(k) for k in range(runs)]
    assert len(set(lengths)) > runs // 2  # runs of varied length
    db = asyncio.run(open_sql(store))
    try:
        count, run_ids, days = db.sql(
            "SELECT count(*), count(DISTINCT run_id), count(DISTINCT ts::DATE) FROM events"
        ).fetchone()
        payload_rows, distinct_payloads = db.sql(
            "SELECT count(*), count(DISTINCT payload_json) FROM events "
            "WHERE type IN ('TaskCompleted', 'StepCompleted')"
        ).fetchone()
        timeline = db.sql("SELECT count(*) FROM events WHERE run_id = ?", [target]).fetchone()
    finally:
        db.close()
    assert (count, run_ids, days) == (sum(lengths), runs, runs)
    assert distinct_payloads == payload_rows  # no payload repeats
    assert timeline == (bench_archive.run_length(runs // 2),)
    assert target == bench_archive.run_id(runs // 2)
