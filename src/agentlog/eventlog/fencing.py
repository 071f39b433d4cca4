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
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from agentlog.errors import (
    ConflictError,
    EventLogError,
    FencedError,
    LeaseHeldError,
    UnknownRunError,
)
from agentlog.eventlog.events import utcnow
from agentlog.eventlog.records import RunInfo

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
    now = now or utcnow()
    if info.lease_expires_at is not None and info.lease_expires_at > now:
        raise LeaseHeldError(
            info.run_id, info.lease_owner, (info.lease_expires_at - now).total_seconds()
        )


def check_epoch(run_id: str, epoch: int, current: int) -> None:
    """Raise unless ``epoch`` is the run's ``current`` writer epoch.

    Raises:
        FencedError: a newer writer claimed the run.
        EventLogError: ``epoch`` was never claimed (a caller's bug).
    """
    if epoch < current:
        raise FencedError(run_id, epoch, current)
    if epoch > current:
        raise EventLogError(
            f"run {run_id!r}: writer epoch {epoch} was never claimed (current is "
            f"{current}); call claim_writer() before appending."
        )


def check_next(run_id: str, last_seq: int, first_seq: int, epoch: int, current: int) -> None:
    """Raise the fencing or conflict error that an append deserves, if any.

    Fencing is checked first: a fenced writer learns that it must stop, not
    that it read a stale seq.
    """
    check_epoch(run_id, epoch, current)
    if first_seq != last_seq + 1:
        raise ConflictError(run_id, last_seq + 1, first_seq)


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
    if not force:
        check_lease(info, now)
    return dataclasses.replace(
        info, writer_epoch=info.writer_epoch + 1, lease_owner=owner, lease_expires_at=expires
    )


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
    if info is None:
        raise UnknownRunError(run_id, where)
    check_epoch(run_id, epoch, info.writer_epoch)
    return dataclasses.replace(info, lease_expires_at=expires)
