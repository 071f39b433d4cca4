"""The LangGraph benchmark's Kafka side still runs (a smoke run at a tiny N, no timings)."""

from __future__ import annotations

import pytest
from benchmarks import bench_langgraph

pytestmark = pytest.mark.kafka


def test_the_kafka_rows_come_out_with_their_bytes_counted(kafka_bootstrap: str) -> None:
    # A broker the test does not own: bytes are the records' sizes, read back.
    kafka = bench_langgraph.Kafka(kafka_bootstrap, None)
    rows = bench_langgraph.run([3], ["sync"], 5, kafka, fresh=1, warm=2)
    by_name = {row.name: row for row in rows}
    loop = by_name["checkpointer only, loop N=3 sync: agentlog kafka"]
    assert loop.extra["kafka_bytes"] == "sum of record key+value"
    assert loop.extra["MB"] > 0 and loop.extra["x_fewer_bytes"] > 0
    cold = "bounded state, 5-checkpoint thread, get_tuple cold (first call, fresh saver)"
    assert by_name[f"{cold}: agentlog kafka"].median > 0
