"""A run's trace spans a SIGKILL and a takeover by another process.

Two real processes share one SQLite file (tests/otel/traced_worker.py). The
first starts a run and is SIGKILLed while the run's ``slow`` task runs; the
second, a worker, takes the run over once the dead writer's lease ran out and
finishes it. Both write every span they end to one file as JSON lines. The
spans of both processes are one trace: the second's run span is a child of
the run's start span (its traceparent is stored in the run's RunStarted), it
records a takeover, and the task the first process died in runs again under
the same idempotency key.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crash.worker import kill, spawn_ready
from tests.otel.takeover import check_the_takeover_trace, run_python, spans_in

pytestmark = pytest.mark.process


def test_a_trace_spans_a_sigkill_and_a_takeover(tmp_path: Path) -> None:
    url, spans = f"sqlite:///{tmp_path / 'log.db'}", tmp_path / "spans.jsonl"
    worker = ["-m", "tests.otel.traced_worker", url, str(spans)]
    first = spawn_ready([*worker, "first"], tmp_path / "first.log")
    try:
        assert first.stdout is not None
        assert first.stdout.readline().strip() == "HUNG"  # inside the slow task
    finally:
        kill(first)
    before = spans_in(spans)
    assert not [s for s in before if s["name"].startswith("agentlog.run")]  # killed mid-run
    second = run_python([*worker, "second"], 180)
    check_the_takeover_trace(spans, before, second, url)
