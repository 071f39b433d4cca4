"""A run's trace spans a worker SIGKILL and a takeover on a worker fleet (SQLite, Kafka).

Real processes (tests/otel/traced_worker.py): a client submits run ``r``; the
first worker drives it until its ``slow`` task runs and is SIGKILLed there; a
second worker takes the run over (on Kafka: once the group hands it the dead
worker's partitions) and finishes it. Every process writes each span it ends
to one file. Their spans are one trace, the second worker's run span is a
child of the client's start span, it counts and records one takeover, and the
task the first worker died in runs again under the same idempotency key.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crash.worker import kill, spawn_ready
from tests.otel.takeover import check_the_takeover_trace, run_python, spans_in

pytestmark = [pytest.mark.fleet, pytest.mark.process]


@pytest.mark.timeout(400)
def test_a_trace_spans_a_worker_sigkill_and_a_takeover(
    backend: str, log_url: str, worker_url: str, tmp_path: Path
) -> None:
    spans = tmp_path / "spans.jsonl"
    traced = ["-m", "tests.otel.traced_worker"]
    first = spawn_ready([*traced, worker_url, str(spans), "first", "fleet"], tmp_path / "first.log")
    try:
        submitted = run_python([*traced, log_url, str(spans), "submit", "fleet"], 120)
        assert submitted.stdout.strip() == "SUBMITTED", submitted.stderr[-3000:]
        assert first.stdout is not None
        assert first.stdout.readline().strip() == "HUNG"  # inside the slow task
    finally:
        kill(first)
    before = spans_in(spans)
    assert not [s for s in before if s["name"].startswith("agentlog.run")]  # killed mid-run
    second = run_python([*traced, worker_url, str(spans), "second", "fleet"], 300)
    check_the_takeover_trace(spans, before, second, log_url)
