"""``cancel`` racing ``resume`` on PostgreSQL never raises FencedError (issue 19 item 6).

The calls share their code with SQLite (``runtime/_requests.py``); this runs
the same bounded race on a real server, through two connection pools.
"""

from __future__ import annotations

from tests.support.cancel_race import race_cancel_and_resume


async def test_cancel_and_resume_raced_from_two_runtimes_never_raise_fenced(
    postgres_url: str,
) -> None:
    seen = await race_cancel_and_resume(postgres_url, runs=40)
    assert sum(n for outcome, n in seen.items() if outcome.startswith("cancel")) == 40
