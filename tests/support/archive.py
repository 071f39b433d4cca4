"""Shared values of the archive tests."""

from __future__ import annotations

from datetime import UTC, datetime

#: A fixed "now", long after the helper runs started, for idleness and TTLs.
NOW = datetime(2024, 3, 2, 12, 0, tzinfo=UTC)
