"""The LangGraph benchmark still runs: every backend, mode and size gives its row.

A smoke run at a tiny N so that CI keeps ``benchmarks/bench_langgraph.py``
working; it checks the rows' shape and the stored bytes, never timings. The
Kafka side has its own smoke test in ``tests/eventlog/kafka/test_bench_langgraph.py``.
"""

from __future__ import annotations

from benchmarks import bench_langgraph


def test_the_loop_and_get_tuple_rows_come_out_for_both_sqlite_savers() -> None:
    rows = bench_langgraph.run([3, 6], ["sync", "async"], 12, None, fresh=2, warm=3)
    by_name = {row.name: row for row in rows}
    for mode in ("sync", "async"):
        for n in (3, 6):
            peer = by_name[f"loop N={n} {mode}: SqliteSaver"]
            ours = by_name[f"loop N={n} {mode}: agentlog sqlite"]
            assert peer.extra["MB"] > 0 and ours.extra["MB"] > 0
            assert ours.extra["x_fewer_bytes"] > 0 and ours.extra["ms_vs_peer"] > 0
        assert "flat_N6/N3" in by_name[f"loop N=6 {mode}: agentlog sqlite"].extra
    for backend in ("SqliteSaver", "agentlog sqlite"):
        row = by_name[f"get_tuple latest of 12-checkpoint thread, cold: {backend}"]
        assert row.median > 0 and row.extra["warm_median_ms"] > 0
    assert len(rows) == 2 * 2 * 2 + 2
