"""The claim and lease rules every backend calls (eventlog/_fencing.py, from the table
of cases in eventlog/_claim_cases.py), and Capabilities."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import agentlog
from agentlog.errors import (
    ConfigError,
    EventLogError,
    FencedError,
    LeaseHeldError,
    UnknownRunError,
)
from agentlog.eventlog._base import (
    Capabilities,
    RunInfo,
    check_next,
    claimed,
    lease_expiry,
    leased,
)
from agentlog.eventlog._claim_cases import (
    CLAIM_CASES,
    LEASE_CASES,
    Ask,
    lua_refusals,
    sql_grant,
)
from agentlog.eventlog.postgres import _schema as postgres_schema
from agentlog.eventlog.redis import _schema as redis_scripts
from agentlog.testing._claim_examples import EXAMPLES, ClaimExample

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


# -- the table of cases (eventlog/_claim_cases.py) -------------------------------------

_SRC = Path(agentlog.__file__).parent
#: A claim's lease comparison in SQL, and a claim's or lease's number test in
#: Lua: the rule pieces that only the table may say.
_RULE_PIECES = (
    re.compile(r"agentlog_runs\.lease_expires_at\s*(<=|>=|<|>)"),
    re.compile(r"tonumber\([\w\[\]]+\)\s*(>|<|~=|==)\s*tonumber\(ARGV"),
)


def _python_outcome(example: ClaimExample) -> tuple[type[Exception] | None, RunInfo | None]:
    """Make ``example``'s call through the Python rules at NOW: the error, or the row after."""
    row = example.row("r", NOW)
    try:
        if example.call == "claim":
            expires = lease_expiry(example.lease_asked, NOW)
            base = row or RunInfo("r")
            return None, claimed(
                base, owner="claimer", expires=expires, force=example.force, now=NOW
            )
        if example.call in ("renew", "release"):
            expires = None if example.call == "release" else lease_expiry(example.lease_asked, NOW)
            return None, leased(row, "r", example.ask, expires)
        assert row is not None
        check_next("r", row.last_seq, example.seq, example.ask, row.writer_epoch)
        return None, dataclasses.replace(row, last_seq=example.seq)
    except EventLogError as exc:
        return type(exc), None


@pytest.mark.parametrize("example", EXAMPLES, ids=str)
def test_every_example_through_the_python_rules(example: ClaimExample) -> None:
    error, row = _python_outcome(example)
    assert error is example.error
    if row is not None:
        assert row.writer_epoch == example.then_epoch
        if example.call == "claim":
            assert row.lease_owner == "claimer"
        if example.call == "release":
            assert row.lease_expires_at is None


def test_each_case_of_the_tables_is_the_one_its_examples_reach() -> None:
    tables = {"claim": CLAIM_CASES, "renew": LEASE_CASES, "release": LEASE_CASES}
    reached: set[str] = set()
    for example in EXAMPLES:
        if example.call not in tables:
            continue
        now_row = example.row("r", NOW)
        ask = Ask("r", now_row, NOW, force=example.force, epoch=example.ask)
        case = next(c for c in tables[example.call] if all(t.holds(ask) for t in c.when))
        assert case.name == example.case, example
        reached.add(case.name)
    assert reached == {case.name for case in CLAIM_CASES + LEASE_CASES}


def test_the_server_claim_and_lease_code_is_generated_from_the_table() -> None:
    assert f"WHERE {sql_grant(CLAIM_CASES)} RETURNING" in postgres_schema.CLAIM
    assert postgres_schema.LEASE.endswith(f"AND ({sql_grant(LEASE_CASES)})")
    assert lua_refusals(CLAIM_CASES) in redis_scripts.CLAIM
    assert lua_refusals(LEASE_CASES) in redis_scripts.LEASE
    # No other module says a piece of the rules itself, in SQL or in Lua.
    saying = [
        (path.relative_to(_SRC).as_posix(), pattern.pattern)
        for path in sorted(_SRC.rglob("*.py"))
        if path.name != "_claim_cases.py"
        for pattern in _RULE_PIECES
        if pattern.search(path.read_text())
    ]
    assert saying == []
    postgres_source = (_SRC / "eventlog" / "postgres" / "_log.py").read_text()
    assert "SET lease_expires_at" not in postgres_source  # the lease statement is LEASE
