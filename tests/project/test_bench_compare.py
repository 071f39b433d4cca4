"""``python -m benchmarks.compare`` matches two runs' rows and says after over before.

These pin the comparison's logic (matching by area and name, the ratio, the
floor and peer cells, both file shapes), never a timing.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from benchmarks.compare import (
    COMPARE_COLUMNS,
    Pair,
    compare_cells,
    load_results,
    main,
    match_rows,
    peer_ratios,
    ratio,
)
from benchmarks.harness import Row


def _cell(pair: Pair, column: str) -> str:
    return compare_cells(pair)[COMPARE_COLUMNS.index(column)]


def test_rows_are_matched_by_area_and_name_and_one_sided_rows_say_so() -> None:
    before = [
        Row("eventlog", "append", "us", 400.0, 900.0, n=100),
        Row("eventlog", "gone", "ms", 1.0, n=1),
        Row("runtime", "step", "us", 800.0, 1600.0, n=50),
    ]
    after = [
        Row("runtime", "step", "us", 600.0, 1000.0, n=50),
        Row("eventlog", "append", "us", 300.0, 700.0, n=100),
        Row("eventlog", "new", "ms", 2.0, n=1),
    ]
    pairs = match_rows(before, after)
    assert [(p.area, p.name) for p in pairs] == [
        ("eventlog", "append"),
        ("eventlog", "gone"),
        ("eventlog", "new"),
        ("runtime", "step"),
    ]
    append, gone, new, step = pairs
    assert append.before is before[0] and append.after is after[1]
    assert step.before is before[2] and step.after is after[0]
    assert gone.after is None and _cell(gone, "after/before") == "only before"
    assert new.before is None and _cell(new, "after/before") == "only after"


def test_a_name_that_repeats_pairs_in_order() -> None:
    before = [Row("a", "x", "ms", 1.0), Row("a", "x", "ms", 2.0)]
    after = [Row("a", "x", "ms", 3.0), Row("a", "x", "ms", 8.0), Row("a", "x", "ms", 5.0)]
    pairs = match_rows(before, after)
    assert [ratio(p) for p in pairs] == [3.0, 4.0, None]
    assert pairs[2].before is None and pairs[2].after is after[2]


def test_the_ratio_is_after_over_before_and_only_for_the_same_unit() -> None:
    faster = Pair("a", "x", Row("a", "x", "us", 400.0), Row("a", "x", "us", 100.0))
    assert ratio(faster) == pytest.approx(0.25)
    assert _cell(faster, "after/before") == "0.25x"
    other_unit = Pair("a", "x", Row("a", "x", "ms", 1.0), Row("a", "x", "us", 900.0))
    assert ratio(other_unit) is None and _cell(other_unit, "unit") == "ms -> us"
    zero = Pair("a", "x", Row("a", "x", "ms", 0.0), Row("a", "x", "ms", 1.0))
    assert ratio(zero) is None


def test_the_floor_and_peer_ratios_of_each_side_are_shown_and_nothing_else() -> None:
    row = Row(
        "runtime",
        "step",
        "us",
        500.0,
        extra={
            "x_sqlite_floor": 2.5,
            "ratio_vs_raw": 1.25,
            "ms_vs_SqliteSaver": 0.8,
            "target": "ratio<=1.5",
            "steps_per_s": 2000.0,
            "durability": "WAL",
        },
    )
    assert peer_ratios(row) == "x_sqlite_floor=2.500, ratio_vs_raw=1.250, ms_vs_SqliteSaver=0.800"
    pair = Pair("runtime", "step", None, row)
    assert _cell(pair, "after: floor / peer") == peer_ratios(row)
    assert _cell(pair, "before: floor / peer") == ""


def test_both_file_shapes_load_with_each_areas_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = [dataclasses.asdict(Row("eventlog", "append", "us", 400.0, 900.0, n=100))]
    new = {
        "load_before": [3.0, 2.0, 1.0],
        "load_after": [4.0, 2.5, 1.5],
        "areas": {
            "eventlog": {"load_before": [3.0, 2.0, 1.0], "load_after": [3.5, 2.1, 1.1]},
            "kafka": {"load_before": "5.00 4.00 3.00 1/2 3", "error": "broker did not start"},
        },
        "rows": [dataclasses.asdict(Row("eventlog", "append", "us", 200.0, 300.0, n=100))],
    }
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    loaded = load_results(tmp_path / "new.json")
    assert loaded.areas["eventlog"].load_after == (3.5, 2.1, 1.1)
    assert loaded.areas["kafka"].load_before == (5.0, 4.0, 3.0)
    assert main([str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| eventlog | append | us | 400 | 900 | 200 | 300 | 0.50x |" in out
    assert "3.00 / 2.00 / 1.00 -> 3.50 / 2.10 / 1.10" in out
    assert "failed: broker did not start" in out


def test_a_file_that_is_not_results_is_refused_with_its_name(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"nothing": 1}))
    with pytest.raises(ValueError, match=r"bad\.json: expected a list of rows"):
        load_results(bad)
