"""Concrete examples of every case of the claim and lease tables, and of an append's fence.

:mod:`agentlog.eventlog._claim_cases` writes the rules once, as ordered
cases; these examples say, by hand, what each case must do to a run in a
given state, so that the table itself is pinned and every backend is run
against it (:class:`~agentlog.testing._contract_claims.ClaimsContract`), as
are the SQL and Lua generated from it (the backends' own tests).

An example's run is set up by claims alone: ``epoch`` claims (None: no run
at all), the last one by ``"holder"`` with a lease that ends ``lease``
seconds from now (negative: already ended; None: no lease). Then one call
is made: a claim by ``"claimer"`` (``force``, asking ``lease_asked``), a
renewal or release by the writer of epoch ``ask``, or an append of one event
at ``seq`` under epoch ``ask``. A lease that ends at now or a microsecond
after it needs a clock the test controls, which a backend's API does not
take: those examples run only where ``now`` is given (the pure rules, and
the SQL and Lua run with a ``now`` of the test's); :data:`BACKEND_EXAMPLES`
leaves them out, and the others keep their leases ten minutes away from
now, so a slow machine cannot turn one into another.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from agentlog.errors import (
    ConflictError,
    EventLogError,
    FencedError,
    LeaseHeldError,
    UnknownRunError,
)
from agentlog.eventlog._base import EventLog, RunInfo
from agentlog.eventlog.events import utcnow
from agentlog.testing._events import ev

__all__ = ["BACKEND_EXAMPLES", "EXAMPLES", "ClaimExample", "run_example"]

Call = Literal["claim", "renew", "release", "append"]


@dataclass(frozen=True)
class ClaimExample:
    """One call on a run in a given state, and what must follow.

    Attributes:
        case: the name of the table case it exercises (``claim_cases``), or
            for an append, the fence rule it shows.
        call: the call made.
        epoch: the run's writer epoch before the call; None: no run.
        lease: the run's lease ends this many seconds from now; None: none.
        force: a claim's ``force``.
        lease_asked: the ``lease_seconds`` a claim or renewal asks for.
        ask: the epoch a renewal, release or append names.
        seq: the seq an append names (the run has no events).
        error: the exact type of the error a refused call raises; None: granted.
        then_epoch: the run's writer epoch after a granted call.
    """

    case: str
    call: Call
    epoch: int | None = 1
    lease: float | None = None
    force: bool = True
    lease_asked: float | None = 600.0
    ask: int = 1
    seq: int = 1
    error: type[EventLogError] | None = None
    then_epoch: int = 1

    def row(self, run_id: str, now: datetime) -> RunInfo | None:
        """The run's index row before the call, as a table reads it."""
        if self.epoch is None:
            return None
        expires = None if self.lease is None else now + timedelta(seconds=self.lease)
        return RunInfo(
            run_id, writer_epoch=self.epoch, lease_owner="holder", lease_expires_at=expires
        )


_HELD, _OTHER = "a polite claim of a live lease", "any other claim"
_NO_ROW, _STALE, _WRITER = "a run with no row", "another epoch than the run's", "the run's writer"

#: Every example, the ones at the exact end of a lease included.
EXAMPLES: tuple[ClaimExample, ...] = (
    ClaimExample(_OTHER, "claim", epoch=None, then_epoch=1),
    ClaimExample(_OTHER, "claim", epoch=None, force=False, then_epoch=1),
    ClaimExample(_OTHER, "claim", epoch=1, lease=600, then_epoch=2),
    ClaimExample(_OTHER, "claim", epoch=3, lease_asked=None, then_epoch=4),
    ClaimExample(_HELD, "claim", epoch=1, lease=600, force=False, error=LeaseHeldError),
    ClaimExample(_HELD, "claim", epoch=2, lease=1e-6, force=False, error=LeaseHeldError),
    ClaimExample(_OTHER, "claim", epoch=1, lease=-600, force=False, then_epoch=2),
    ClaimExample(_OTHER, "claim", epoch=2, lease=None, force=False, then_epoch=3),
    ClaimExample(_OTHER, "claim", epoch=1, lease=0, force=False, then_epoch=2),
    ClaimExample(_WRITER, "renew", epoch=1, lease=600, ask=1, then_epoch=1),
    ClaimExample(_WRITER, "renew", epoch=2, lease=-600, ask=2, then_epoch=2),
    ClaimExample(_STALE, "renew", epoch=2, lease=600, ask=1, error=FencedError),
    ClaimExample(_STALE, "renew", epoch=1, lease=600, ask=2, error=EventLogError),
    ClaimExample(_NO_ROW, "renew", epoch=None, ask=1, error=UnknownRunError),
    ClaimExample(_WRITER, "release", epoch=1, lease=600, ask=1, then_epoch=1),
    ClaimExample(_STALE, "release", epoch=3, lease=600, ask=2, error=FencedError),
    ClaimExample(_STALE, "release", epoch=1, ask=2, error=EventLogError),
    ClaimExample(_NO_ROW, "release", epoch=None, ask=1, error=UnknownRunError),
    ClaimExample("append: the writer, at the next seq", "append", epoch=2, ask=2, then_epoch=2),
    ClaimExample("append: an older epoch is fenced", "append", ask=0, error=FencedError),
    ClaimExample("append: an unclaimed epoch", "append", ask=2, error=EventLogError),
    ClaimExample("append: the writer, not the next seq", "append", seq=2, error=ConflictError),
    ClaimExample("append: fenced before conflict", "append", epoch=2, seq=3, error=FencedError),
)

#: The examples a backend runs through its API: all but those at the end of
#: a lease, whose ``now`` the API does not take.
BACKEND_EXAMPLES = tuple(
    example for example in EXAMPLES if example.lease is None or abs(example.lease) >= 600
)


async def _prepare(log: EventLog, run_id: str, example: ClaimExample) -> None:
    for n in range(example.epoch or 0):
        last = n == (example.epoch or 0) - 1
        await log.claim_writer(
            run_id,
            owner="holder" if last else "before",
            lease_seconds=example.lease if last else None,
        )


async def _call(log: EventLog, run_id: str, example: ClaimExample) -> None:
    if example.call == "claim":
        force, lease = example.force, example.lease_asked
        await log.claim_writer(run_id, owner="claimer", lease_seconds=lease, force=force)
    elif example.call == "renew":
        await log.renew_lease(run_id, example.ask, example.lease_asked or 600.0)
    elif example.call == "release":
        await log.release_lease(run_id, example.ask)
    else:
        await log.append([ev(run_id, example.seq, epoch=example.ask)])


async def run_example(log: EventLog, run_id: str, example: ClaimExample) -> None:
    """Set ``run_id`` up as ``example`` says on ``log``, make its call, check the outcome.

    Raises:
        AssertionError: naming the example, if the outcome differs.
    """
    await _prepare(log, run_id, example)
    before, start = await log.find_run(run_id), utcnow()
    raised: EventLogError | None = None
    try:
        await _call(log, run_id, example)
    except EventLogError as exc:
        raised = exc
    after = await log.find_run(run_id)
    where = f"{example} on {type(log).__name__}"
    assert type(raised) is (example.error or type(None)), f"{where}: raised {raised!r}"
    if example.error is not None:
        assert after == before, f"{where}: a refused call changed the run: {before} -> {after}"
        return
    assert after is not None, f"{where}: no run after a granted call"
    assert after.writer_epoch == example.then_epoch, f"{where}: the run is now {after}"
    asked = None if example.call == "release" else example.lease_asked
    if example.call == "append":
        assert after.last_seq == example.seq, f"{where}: the run is now {after}"
    elif asked is None:
        assert after.lease_expires_at is None, f"{where}: the run is now {after}"
    else:
        assert after.lease_expires_at is not None and after.lease_expires_at > start, (
            f"{where}: the lease asked for was not taken: {after}"
        )
    if example.call == "claim":
        assert after.lease_owner == "claimer", f"{where}: the run is now {after}"
