"""The LangGraph benchmark still runs: every backend, mode and size gives its row.

A smoke run at a tiny N so that CI keeps ``benchmarks/bench_langgraph.py``
working; it checks the rows' shape, the stored bytes, the durability each
side ran with and the ratios' arithmetic, never timings. The Kafka side has
its own smoke test in ``tests/eventlog/kafka/test_bench_langgraph.py``.
"""

from __future__ import annotations

from benchmarks import bench_langgraph
from benchmarks.bench_langgraph import Bounded

SAVERS = ("SqliteSaver", "agentlog sqlite")


def test_the_checkpointer_only_loop_and_bounded_rows_come_out_for_both_sqlite_savers() -> None:
    rows = bench_langgraph.run([3, 6], ["sync", "async"], 12, None, fresh=2, warm=3)
    by_name = {row.name: row for row in rows}
    for mode in ("sync", "async"):
        for n in (3, 6):
            peer = by_name[f"checkpointer only, loop N={n} {mode}: SqliteSaver"]
            ours = by_name[f"checkpointer only, loop N={n} {mode}: agentlog sqlite"]
            assert peer.extra["MB"] > 0 and ours.extra["MB"] > 0
            assert ours.extra["x_fewer_bytes"] > 0 and ours.extra["ms_vs_peer"] > 0
            assert ours.extra["ms_vs_SqliteSaver"] > 0 and "ms_vs_SqliteSaver" not in peer.extra
            # both sides' durability is pinned and printed, the same on both
            assert peer.extra["durability"] == "journal_mode=wal, synchronous=FULL"
            assert ours.extra["durability"] == "journal_mode=wal, synchronous=FULL"
            assert peer.n == n and peer.p99 is not None
        assert "flat_N6/N3" in by_name[f"checkpointer only, loop N=6 {mode}: agentlog sqlite"].extra
    thread = "bounded state, 12-checkpoint thread"
    for backend in SAVERS:
        stored = by_name[f"{thread}, bytes stored: {backend}"]
        assert stored.median > 0 and stored.n == 1
        cold = by_name[f"{thread}, get_tuple cold (first call, fresh saver): {backend}"]
        warm = by_name[f"{thread}, get_tuple warm (same saver): {backend}"]
        opened = by_name[f"{thread}, open a thread (fresh saver + first get_tuple): {backend}"]
        assert (cold.n, warm.n, opened.n) == (2, 3, 2)
        assert opened.median >= cold.median > 0  # opening includes the first get_tuple
    ours_bytes = by_name[f"{thread}, bytes stored: agentlog sqlite"]
    peer_bytes = by_name[f"{thread}, bytes stored: SqliteSaver"]
    assert ours_bytes.extra["vs_SqliteSaver"] == round(ours_bytes.median / peer_bytes.median, 2)
    assert len(rows) == 2 * 2 * 2 + 2 * 4


def test_bounded_ratios_are_ours_over_each_peer_and_a_failed_saver_says_why() -> None:
    results = {
        "SqliteSaver": Bounded(1000, (0.001,), (0.0005, 0.0005), (0.002,)),
        "PostgresSaver": Bounded(4000, (0.004,), (0.002, 0.002), (0.010,)),
        "agentlog sqlite": Bounded(2000, (0.002,), (0.001, 0.001), (0.004,)),
        "agentlog kafka": Bounded(failed="no broker"),
    }
    by_name = {row.name: row for row in bench_langgraph._bounded_rows(results, 10)}
    thread = "bounded state, 10-checkpoint thread"
    ours = by_name[f"{thread}, bytes stored: agentlog sqlite"]
    assert ours.extra == {"vs_SqliteSaver": 2.0, "vs_PostgresSaver": 0.5}
    warm = by_name[f"{thread}, get_tuple warm (same saver): agentlog sqlite"]
    assert warm.extra == {"vs_SqliteSaver": 2.0, "vs_PostgresSaver": 0.5}
    assert by_name[f"{thread}, bytes stored: SqliteSaver"].extra == {}  # a peer has no ratio
    assert by_name[f"{thread}: agentlog kafka"].extra == {"failed": "no broker"}
    # one cold sample: the row says n=1 rather than print a p99
    assert by_name[f"{thread}, get_tuple cold (first call, fresh saver): SqliteSaver"].n == 1
