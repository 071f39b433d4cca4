"""Queues: a concurrency limit, a rate limit and priorities, across a fleet.

A workflow joins a queue with ``Workflow(..., queue=Queue("emails",
concurrency=5, rate=Rate(10, per=timedelta(minutes=1))))``. Its runs are
recorded at once when submitted (nothing is lost: ``RunStarted`` is on
record before ``submit`` returns, with the queue and the run's priority in
its ``limits["queue"]``) and wait, listed as ``queued`` in the run index,
until a worker's queue admits them: then the admitting writer records
``RunAdmitted`` (once per run) and the index lists the run as ``running``,
with ``admitted_at``.

What counts, and why there is no counter to repair after a SIGKILL:

* concurrency: the runs of the queue a writer holds a live lease on (every
  backend keeps the lease in its run index); a dead worker's lease expires
  and its slot with it.
* rate: the runs whose ``admitted_at`` (the time of their ``RunAdmitted``,
  recorded durably before the run acts) falls in the last ``per``, plus the
  queued runs a writer holds right now (admissions under way).
* priority: a queued run is admitted only while no queued run ranked ahead
  of it (lower priority number, then earlier ``started_at``, then run id)
  waits with no writer.

A worker claims the run first (the claim is visible in the index at once)
and counts after (:mod:`agentlog.runtime._queue_admission`): among runs
claimed side by side, the last to claim sees every other claim, so a
queue never goes over a limit; two workers that each see the other may both
let go, and try again on their next pass. On Kafka, whose run index is
owned per partition, one fenced admitter per queue counts it instead
(:mod:`agentlog.runtime._queue_slots`; docs/queues.md, "Kafka").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from agentlog.errors import ConfigError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog._queue_slots import QueueSlots

__all__ = ["Queue", "Rate", "check_priority", "check_queue"]


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclass(frozen=True)
class Rate:
    """At most ``runs`` runs of a queue started in any window of ``per``.

    "Started" is admitted by the queue for the first time (``RunAdmitted``);
    a run that parks and resumes, or that another worker takes over after a
    crash, is not started again. The window is rolling: at any moment, the
    admissions of the last ``per`` are counted.

    Raises:
        ConfigError: ``runs`` is not an int >= 1, or ``per`` is not a
            positive timedelta.
    """

    runs: int
    per: timedelta

    def __post_init__(self) -> None:
        if not _positive_int(self.runs):
            raise ConfigError(f"a queue's rate needs runs >= 1 (an int), got {self.runs!r}")
        if not isinstance(self.per, timedelta) or self.per <= timedelta(0):
            raise ConfigError(f"a queue's rate needs per= a positive timedelta, got {self.per!r}")


@dataclass(frozen=True)
class Queue:
    """A named queue: its runs wait until a worker may start them.

    Its limits hold across every worker of a fleet that shares one log
    (SQLite, PostgreSQL, Redis, or a Kafka worker fleet). A run counts against ``concurrency``
    while a writer holds its live lease, from the claim that starts (or
    continues) it until it ends, parks or is handed over; it counts against
    ``rate`` once, when the queue first admits it. Among queued runs, the
    one with the lowest ``priority`` number (``Runtime.submit(...,
    priority=)``) is admitted first, and the oldest among equals.

    Args:
        name: the queue's name; workflows with a queue of the same name share
            its limits (give them equal ``Queue`` values).
        concurrency: at most this many runs of the queue are driven at once
            (None: no limit).
        rate: at most ``rate.runs`` runs started per ``rate.per`` (None: no
            limit).

    Raises:
        ConfigError: an empty name, a concurrency that is not an int >= 1,
            or a rate that is not a :class:`Rate`.
    """

    name: str
    concurrency: int | None = None
    rate: Rate | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"a queue needs a non-empty name, got {self.name!r}")
        limit = self.concurrency
        if limit is not None and not _positive_int(limit):
            raise ConfigError(
                f"queue {self.name!r}: concurrency must be an int >= 1 (the most runs "
                f"driven at once), got {limit!r}"
            )
        if self.rate is not None and not isinstance(self.rate, Rate):
            raise ConfigError(
                f"queue {self.name!r}: rate must be a Rate(runs, per=timedelta), got {self.rate!r}"
            )


def check_priority(workflow: str, queue: Queue | None, priority: object) -> int:
    """The run's priority in its queue (0 when not given).

    Raises:
        ConfigError: a priority that is not an int, or one for a workflow
            with no queue (nothing would order by it).
    """
    if priority is None:
        return 0
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ConfigError(f"priority must be an int (lower is first), got {priority!r}")
    if queue is None:
        raise ConfigError(
            f"priority={priority} given for workflow {workflow!r}, which has no queue; "
            "a priority orders a queue's runs: give the workflow queue=Queue(...)"
        )
    return priority


class _Queued(Protocol):
    """What a queue check reads of a workflow (not imported: it imports us)."""

    @property
    def name(self) -> str: ...

    @property
    def queue(self) -> Queue | None: ...


def check_queue(log: EventLog, workflow: _Queued, registered: Iterable[_Queued]) -> None:
    """Refuse a queued workflow where its limit could not be kept.

    Raises:
        ConfigError: the log neither counts claims in one place (SQLite,
            PostgreSQL, Redis) nor keeps queue slots (a Kafka worker fleet),
            as on standalone Kafka; or another
            registered workflow has a queue of the same name with another limit.
    """
    queue = workflow.queue
    if queue is None:
        return
    if not (log.direct_writes and log.capabilities.claims_seen) and not isinstance(log, QueueSlots):
        raise ConfigError(
            f"workflow {workflow.name!r} is in queue {queue.name!r}, but this log has no "
            "queue admitter and its run index need not show another process's claim at "
            "once, so no worker can count the queue's running runs; use SQLite, "
            "PostgreSQL, Redis or a Kafka worker fleet (?group=...) for queued workflows, "
            "or drop queue= and cap the workers with WorkerConfig.workflow_concurrency"
        )
    for other in registered:
        theirs = other.queue
        if theirs is None or other.name == workflow.name:
            continue
        if theirs.name == queue.name and theirs != queue:
            raise ConfigError(
                f"queue {queue.name!r} is {queue} on workflow {workflow.name!r} but "
                f"{theirs} on {other.name!r}; give every workflow of one queue the same Queue"
            )
