"""The LangGraph-on-PostgreSQL benchmark still runs (a smoke run at a tiny N, no timings)."""

from __future__ import annotations

from benchmarks import bench_langgraph
from benchmarks import bench_langgraph_postgres as bench

from tests.services.postgres_server import PostgresServer, fresh_database_url


def test_both_savers_run_the_loop_and_their_tables_are_counted(
    postgres_server: PostgresServer,
) -> None:
    rows = bench.run(lambda: fresh_database_url(postgres_server), [3], ["sync"])
    by_name = {row.name: row for row in rows}
    ours = by_name[f"loop N=3 sync: {bench.OURS}"]
    peer = by_name[f"loop N=3 sync: {bench.PEER}"]
    # Each side's own tables hold its checkpoints: neither count is empty.
    assert ours.extra["MB"] > 0 and peer.extra["MB"] > 0
    assert ours.extra["x_fewer_bytes"] > 0 and ours.extra["x_faster"] > 0
    assert "x_faster" not in peer.extra  # the ratios are ours against the peer


def test_table_bytes_counts_only_the_named_tables(postgres_server: PostgresServer) -> None:
    url = fresh_database_url(postgres_server)
    assert bench.table_bytes(url, bench.AGENTLOG_TABLES) == 0  # nothing created yet
    postgres_server.psql(
        "CREATE TABLE checkpoints (x text); INSERT INTO checkpoints SELECT repeat('x', 100) "
        "FROM generate_series(1, 1000)",
        database=url.rsplit("/", 1)[1],
    )
    assert bench.table_bytes(url, bench.PEER_TABLES) > 100_000
    assert bench.table_bytes(url, bench.AGENTLOG_TABLES) == 0


def test_the_first_save_rows_time_both_savers(postgres_server: PostgresServer) -> None:
    rows = bench.first_save_rows(lambda: fresh_database_url(postgres_server), 3)
    by_name = {row.name: row for row in rows}
    ours = by_name[f"first put of a new thread: {bench.OURS}"]
    peer = by_name[f"first put of a new thread: {bench.PEER}"]
    assert ours.median > 0 and peer.median > 0 and ours.extra["x_peer"] > 0
    assert "x_peer" not in peer.extra  # the ratio is ours against the peer


def test_the_checkpointer_only_table_sets_every_saver_against_both_peers(
    postgres_server: PostgresServer,
) -> None:
    rows = bench_langgraph.run(
        [3],
        ["sync"],
        5,
        None,
        fresh=1,
        warm=2,
        new_database=lambda: fresh_database_url(postgres_server),
    )
    by_name = {row.name: row for row in rows}
    ours = by_name[f"checkpointer only, loop N=3 sync: {bench.OURS}"]
    peer = by_name[f"checkpointer only, loop N=3 sync: {bench.PEER}"]
    assert ours.extra["ms_vs_SqliteSaver"] > 0 and ours.extra["ms_vs_PostgresSaver"] > 0
    assert "ms_vs_PostgresSaver" not in peer.extra  # a peer is not set against the peers
    # PostgresSaver's durability is pinned like agentlog's, and the row says so
    assert peer.extra["durability"] == ours.extra["durability"] == "synchronous_commit=on"
    thread = "bounded state, 5-checkpoint thread"
    stored = by_name[f"{thread}, bytes stored: agentlog sqlite"]
    assert stored.extra["vs_PostgresSaver"] > 0 and stored.extra["vs_SqliteSaver"] > 0
