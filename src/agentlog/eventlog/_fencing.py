"""The writer rules of every backend, written once: claims, leases and epochs.

A backend reads the run's index row inside its own transaction (a SQLite
write transaction, a Kafka partition's next commit, a PostgreSQL
``SELECT ... FOR UPDATE``, a Redis Lua script), asks these pure functions
what the row becomes or which error the call deserves, and writes the
answer in the same transaction. The decision is therefore the same on every
backend; only the atomicity around it is the backend's own.

* :func:`claimed`: the row after a claim (the next epoch, the claimer's lease),
  or :class:`~agentlog.errors.LeaseHeldError` for a polite claim of a run
  whose lease is live;
* :func:`leased`: the row after a renewal or a release, or the
  :class:`~agentlog.errors.FencedError` of a writer that was taken over;
* :func:`check_next`: the conflict or fencing error an append deserves.

The claim and lease decisions are read from the table of cases in
:mod:`~agentlog.eventlog._claim_cases`, and the append's from its
``APPEND_CHECKS``: the tables the PostgreSQL SQL and the Redis Lua are
generated from.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from agentlog.eventlog._claim_cases import (
    APPEND_CHECKS,
    CLAIM_CASES,
    EPOCH_CHECK,
    LEASE_CASES,
    AppendCheck,
    Ask,
    Case,
    grant,
    refuse,
)
from agentlog.eventlog._records import RunInfo
from agentlog.eventlog.events import utcnow

__all__ = [
    "check_epoch",
    "check_lease",
    "check_next",
    "claimed",
    "lease_expiry",
    "leased",
]


def lease_expiry(lease_seconds: float | None, now: datetime | None = None) -> datetime | None:
    """When a lease of ``lease_seconds`` taken ``now`` ends; None for no lease."""
    if lease_seconds is None:
        return None
    return (now or utcnow()) + timedelta(seconds=lease_seconds)


def check_lease(info: RunInfo, now: datetime | None = None) -> None:
    """Raise LeaseHeldError if another writer's lease on the run is still live."""
    refuse(CLAIM_CASES, Ask(info.run_id, info, now or utcnow(), force=False))


def check_epoch(run_id: str, epoch: int, current: int) -> None:
    """Raise unless ``epoch`` is the run's ``current`` writer epoch (the append's fence alone).

    Raises:
        FencedError: a newer writer claimed the run.
        EventLogError: ``epoch`` was never claimed (a caller's bug).
    """
    _refuse_append((EPOCH_CHECK,), run_id, 0, 1, epoch, current)


def check_next(run_id: str, last_seq: int, first_seq: int, epoch: int, current: int) -> None:
    """Raise the fencing or conflict error that an append deserves, if any.

    The checks are :data:`~agentlog.eventlog._claim_cases.APPEND_CHECKS`, in
    their order: fencing first, so a fenced writer learns that it must stop,
    not that it read a stale seq.

    Raises:
        FencedError: a newer writer claimed the run.
        EventLogError: ``epoch`` was never claimed (a caller's bug).
        ConflictError: ``first_seq`` is not the run's next seq.
    """
    _refuse_append(APPEND_CHECKS, run_id, last_seq, first_seq, epoch, current)


def _refuse_append(
    checks: tuple[AppendCheck, ...], run_id: str, last: int, first: int, epoch: int, current: int
) -> None:
    for check in checks:
        if check.refuses(last, first, epoch, current):
            raise check.error(run_id, last, first, epoch, current)


def claimed(
    info: RunInfo, *, owner: str, expires: datetime | None, force: bool, now: datetime | None = None
) -> RunInfo:
    """The run's index row once ``owner`` claims it: one epoch more, its lease.

    Args:
        info: the row as it stands in the claim's transaction (a fresh
            ``RunInfo(run_id)`` for a run never seen).
        owner: who claims, shown in the index.
        expires: the end of the claimer's lease (:func:`lease_expiry`), or None.
        force: when False, a live lease of another writer refuses the claim.

    Raises:
        LeaseHeldError: ``force`` is False and the run's lease is live.
    """
    refuse(CLAIM_CASES, Ask(info.run_id, info, now or utcnow(), force=force))
    return _granted(CLAIM_CASES, info, owner, expires)


def leased(
    info: RunInfo | None, run_id: str, epoch: int, expires: datetime | None, where: str = ""
) -> RunInfo:
    """The run's index row once the writer of ``epoch`` renews (``expires``) or
    releases (None) its lease; the epoch stays.

    Args:
        info: the row in the update's transaction, None if the run is unknown.
        where: the log's URL, for the error.

    Raises:
        UnknownRunError: no row for the run.
        FencedError: a newer writer claimed the run.
    """
    refuse(LEASE_CASES, Ask(run_id, info, epoch=epoch), where)
    assert info is not None  # the table refuses a run with no row
    return _granted(LEASE_CASES, info, info.lease_owner, expires)


def _granted(
    cases: tuple[Case, ...], info: RunInfo, owner: str, expires: datetime | None
) -> RunInfo:
    """The row once the grant that ends ``cases`` applies, with the asked lease."""
    step = grant(cases)
    return dataclasses.replace(
        info,
        writer_epoch=info.writer_epoch + step.epoch_step,
        lease_owner=owner if step.takes_owner else info.lease_owner,
        lease_expires_at=expires,
    )
