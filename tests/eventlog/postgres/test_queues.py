"""A queue's limit on PostgreSQL: three workers, each on its own connection,
take at most the limit between them (the scenario in tests/support/queues.py)."""

from __future__ import annotations

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
