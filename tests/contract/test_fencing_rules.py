"""The claim and lease rules every backend calls (eventlog/fencing.py), and Capabilities."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from agentlog.errors import ConfigError, FencedError, LeaseHeldError, UnknownRunError
from agentlog.eventlog.base import Capabilities, RunInfo, claimed, lease_expiry, leased

NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


def test_a_claim_bumps_the_epoch_and_takes_the_lease() -> None:
    held = RunInfo("r", writer_epoch=4, lease_owner="a", lease_expires_at=NOW + timedelta(1))
    with pytest.raises(LeaseHeldError) as caught:
        claimed(held, owner="b", expires=None, force=False, now=NOW)
    assert caught.value.owner == "a"
    row = claimed(held, owner="b", expires=lease_expiry(30, NOW), force=True, now=NOW)
    assert (row.writer_epoch, row.lease_owner, row.lease_expires_at) == (
        5,
        "b",
        NOW + timedelta(seconds=30),
    )
    expired = claimed(held, owner="c", expires=None, force=False, now=NOW + timedelta(2))
    assert (expired.writer_epoch, expired.lease_expires_at) == (5, None)


def test_a_lease_changes_only_for_the_current_epoch() -> None:
    row = RunInfo("r", last_seq=3, writer_epoch=2, lease_owner="a")
    renewed = leased(row, "r", 2, NOW, "memory://")
    assert renewed == dataclasses.replace(row, lease_expires_at=NOW)
    assert leased(renewed, "r", 2, None).lease_expires_at is None
    with pytest.raises(FencedError):
        leased(row, "r", 1, NOW)
    with pytest.raises(UnknownRunError):
        leased(None, "r", 1, NOW)


def test_a_log_nobody_can_write_is_not_a_log() -> None:
    with pytest.raises(ConfigError, match="EventReader"):
        Capabilities(direct_writes=False)
    assert Capabilities(direct_writes=False, commands=True).commands
