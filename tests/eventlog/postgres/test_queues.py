"""A queue's limit on PostgreSQL: three workers, each on its own connection,
take at most the limit between them (the scenario in tests/support/queues.py)."""

from __future__ import annotations

from agentlog.eventlog.events import utcnow
from tests.support.queues import (
    priorities_order_the_queue,
    rate_limits_starts,
    three_workers_share_a_queue,
)


async def test_three_workers_on_their_own_connections_share_a_queue(postgres_url: str) -> None:
    await three_workers_share_a_queue(postgres_url)


async def test_a_rate_limits_starts_per_period_across_restarts(postgres_url: str) -> None:
    await rate_limits_starts(postgres_url)


async def test_priorities_order_the_queue(postgres_url: str) -> None:
    await priorities_order_the_queue(postgres_url)


async def test_a_rate_reads_the_admissions_of_its_period_from_an_index(postgres_url: str) -> None:
    """admitted_since is a range of agentlog_runs_by_admitted (the planner may
    scan a small table instead; with scans off it must find the index)."""
    import psycopg

    from agentlog.eventlog import open_log

    log = await open_log(postgres_url)
    try:
        assert await log.admitted_since(["nothing-here"], utcnow()) == frozenset()  # type: ignore[attr-defined]
    finally:
        await log.close()
    async with await psycopg.AsyncConnection.connect(postgres_url.split("?")[0]) as conn:
        await conn.execute("SET enable_seqscan = off")
        cur = await conn.execute(
            "EXPLAIN SELECT run_id FROM agentlog_runs WHERE admitted_at > 0 AND workflow IN ('a')"
        )
        plan = " ".join(str(row[0]) for row in await cur.fetchall())
    assert "agentlog_runs_by_admitted" in plan, plan


async def test_an_admission_reads_the_best_ranked_waiting_runs_from_an_index(
    postgres_url: str,
) -> None:
    """queue_runs' two reads are served by the PostgreSQL migration's indexes:
    the waiting runs by rank with a LIMIT, the slot holders by lease (with
    scans off, as above: the planner must find them)."""
    import psycopg

    from agentlog.eventlog import open_log

    log = await open_log(postgres_url)
    try:
        held, waiting = await log.queue_runs("emails", ["mail"], utcnow(), 1)  # type: ignore[attr-defined]
        assert (held, waiting) == ([], [])
    finally:
        await log.close()
    async with await psycopg.AsyncConnection.connect(postgres_url.split("?")[0]) as conn:
        await conn.execute("SET enable_seqscan = off")
        plans = []
        for sql in (
            "SELECT run_id FROM agentlog_runs WHERE status = 'queued' AND queue = 'emails' "
            'ORDER BY priority, started_at, run_id COLLATE "C" LIMIT 1',
            "SELECT run_id FROM agentlog_runs WHERE status IN ('queued', 'running') "
            "AND lease_expires_at > 0 AND queue = 'emails'",
        ):
            cur = await conn.execute(f"EXPLAIN {sql}")
            plans.append(" ".join(str(row[0]) for row in await cur.fetchall()))
    assert "agentlog_runs_queued_by_rank" in plans[0] and "Limit" in plans[0], plans[0]
    assert "agentlog_runs_held_by_lease" in plans[1], plans[1]
