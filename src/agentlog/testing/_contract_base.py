"""What the contract's parts share: the retention setting and capability checks."""

from __future__ import annotations

import pytest

from agentlog.eventlog._base import EventLog

__all__ = ["ContractBase"]


class ContractBase:
    """The settings a backend's test class may override."""

    #: The ``keep_snapshots`` the ``log`` fixture must open the log with.
    keep_snapshots = 3

    @staticmethod
    def require(log: EventLog, capability: str) -> None:
        """Skip the test unless ``log`` claims ``capability`` (see Capabilities)."""
        if not getattr(log.capabilities, capability):
            pytest.skip(f"{type(log).__name__} does not claim capabilities.{capability}")
