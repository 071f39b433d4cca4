"""mypy --strict reports the mistakes users make with the public API (issue 9, item 4)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SEEDED = Path(__file__).parent / "seeded_mistakes.py"


@pytest.mark.process
def test_mypy_reports_every_seeded_mistake(tmp_path: Path) -> None:
    lines = SEEDED.read_text().splitlines()
    marker = "  # seeded: "  # after code, so the docstring's mention is not one
    seeded = {n: line.split(marker)[1] for n, line in enumerate(lines, 1) if marker in line}
    assert len(seeded) >= 8
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental",
         "--cache-dir", str(tmp_path / "cache"), str(SEEDED)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    reported = {int(m.group(1)) for m in re.finditer(r":(\d+): error:", result.stdout)}
    missed = {n: what for n, what in seeded.items() if n not in reported}
    assert not missed, f"mypy did not report: {missed}\n{result.stdout}"
    unexpected = reported - set(seeded)
    assert not unexpected, f"errors on lines with no seeded mistake: {result.stdout}"
