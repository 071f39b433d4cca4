"""The seams a log offers for queues: a run index that reads a queue without
its backlog (:class:`QueueIndex`), and queue slots kept by one fenced process
(:class:`QueueSlots`), for a log whose runs are owned per partition (Kafka).

On SQLite, PostgreSQL and Redis every worker reads every claim, so a queue is
counted from the run index (:mod:`agentlog.runtime._queue_admission`); each
of them is a :class:`QueueIndex`, whose read of a queue costs the same
whatever its backlog (elsewhere the runtime lists the queued runs). On a
partitioned Kafka log no worker sees the others' claims, so one process keeps
each queue's count: the owner of the queue's partition (its *admitter*). A
run's owner asks it for a slot (:meth:`QueueSlots.hold_slot`) before it drives
a queued run, renews the slot as it renews its lease, and lets it go
(:meth:`QueueSlots.release_slot`) when the run parks, ends or is handed over.
See docs/queues.md ("Kafka") for what the admitter guarantees.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from agentlog.eventlog._records import RunInfo

__all__ = ["QueueIndex", "QueueSlots", "SlotAsk", "SlotGrant", "rank", "rank_of"]

_EARLIEST = datetime.min.replace(tzinfo=UTC)


def rank(priority: int, started_at: datetime | None, run_id: str) -> tuple[int, datetime, str]:
    """A queued run's place in its queue, one rule on every backend (and the
    SQL logs' ``queued_by_rank`` index): lower priority number first, then
    the oldest, then by run id. A run with no start time (none is queued
    without one) would rank first."""
    return (priority, started_at or _EARLIEST, run_id)


def rank_of(info: RunInfo) -> tuple[int, datetime, str]:
    """:func:`rank` of an indexed run."""
    return rank(info.priority, info.started_at, info.run_id)


@runtime_checkable
class QueueIndex(Protocol):
    """A run index that reads a queue's admission without its backlog."""

    async def queue_runs(
        self, queue: str, workflows: Collection[str], now: datetime, limit: int
    ) -> tuple[list[RunInfo], list[RunInfo]]:
        """The queued or running runs of ``queue`` (or of ``workflows``) a
        writer holds a live lease on at ``now``, and the ``limit`` best-ranked
        queued runs nobody holds (priority, then the oldest, then the run id),
        best first; both read without the rest of the queue."""
        ...


@dataclass(frozen=True, slots=True)
class SlotAsk:
    """A run's owner asks its queue's admitter for a slot (or to keep one)."""

    queue: str
    run_id: str
    lease_s: float
    """How long the slot is held from the grant unless renewed (the writer lease)."""
    first: bool
    """The run was never admitted: a first admission (counted by the rate, ranked)."""
    priority: int = 0
    started_at: datetime | None = None
    concurrency: int | None = None
    rate_runs: int | None = None
    rate_per_s: float | None = None
    epoch: int = 0
    """The asking writer's epoch: a slot is the newest writer's; a renewal or a
    release from an older writer of the run (a zombie after a takeover) is refused."""


@dataclass(frozen=True, slots=True)
class SlotGrant:
    """The admitter's yes: the run holds a slot until ``expires_at`` (its clock)."""

    granted_at: datetime
    """When the admitter granted it: a first admission's time (``RunAdmitted``)."""
    expires_at: datetime


@runtime_checkable
class QueueSlots(Protocol):
    """A log whose queues are counted by one fenced admitter per queue."""

    async def hold_slot(self, ask: SlotAsk) -> SlotGrant | None:
        """Ask for (or renew) the run's slot; None: no room now (or over the
        rate, or a run ranked ahead waits), so do not drive the run.

        Raises:
            BackendUnavailableError: no admitter answered in time.
        """
        ...

    async def release_slot(self, queue: str, run_id: str, epoch: int = 0) -> None:
        """Let go of the run's slot (it parked, ended or was handed over), as
        its writer of ``epoch`` (a newer writer's slot is kept); sent, not
        waited for: a lost release expires with the slot's lease."""
        ...
