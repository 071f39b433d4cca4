"""The LangGraph-on-PostgreSQL benchmark still runs (a smoke run at a tiny N, no timings)."""

from __future__ import annotations

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
