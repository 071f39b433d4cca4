"""Moved: the contract ships in the package as :class:`agentlog.testing.EventLogContract`.

This name stays so that test modules written against it keep working; new
ones import from :mod:`agentlog.testing`.
"""

from agentlog.testing import EventLogContract

__all__ = ["EventLogContract"]
