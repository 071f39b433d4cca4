"""The contract's claim and lease table: every example of every case, on the backend.

The rules are one table (:mod:`agentlog.eventlog._claim_cases`), read by the
Python of every backend and generated into PostgreSQL's SQL and Redis's Lua.
This part of :class:`~agentlog.testing.EventLogContract` runs the table's
examples (:mod:`agentlog.testing._claim_examples`) through the backend's own
``claim_writer``, ``renew_lease``, ``release_lease`` and ``append``, so a
backend that re-derives a rule, in any language, is caught.
"""

from __future__ import annotations

from agentlog.eventlog._base import EventLog
from agentlog.testing._claim_examples import BACKEND_EXAMPLES, run_example
from agentlog.testing._contract_base import ContractBase

__all__ = ["ClaimsContract"]


class ClaimsContract(ContractBase):
    """Claims, leases and the append's fence by the table (part of :class:`EventLogContract`)."""

    async def test_every_case_of_the_claim_and_lease_tables(self, log: EventLog) -> None:
        # One run per example, on the one log: a fresh store per example would
        # cost a broker's topics each on Kafka.
        for n, example in enumerate(BACKEND_EXAMPLES):
            await run_example(log, f"case-{n}", example)
