"""Queues: at most N runs of a named queue driven at once, across a fleet.

A workflow joins a queue with ``Workflow(..., queue=Queue("emails",
concurrency=5))``. Its runs are recorded at once when submitted (nothing is
lost: ``RunStarted`` is on record before ``submit`` returns) and wait, with
status ``running`` and no live writer, until a worker has room in the queue.

Why no new storage: a run of the queue is *driven* exactly while a writer
holds its live lease, and every backend already keeps that lease in its run
index, beside the run's status and workflow. So room is counted from the
index, with no counter to repair after a SIGKILL (a dead worker's lease
expires and its slot with it).

Why the count is taken after the claim: two workers that each counted
``N - 1`` and then claimed would both start a run. Here a worker claims the
run first (the claim is visible in the index at once) and counts after:
among any set of runs started side by side, the last to claim sees every
other one, so if the queue would go over its limit, that one lets go
(its lease is released and it stays queued). The count is a read of the
run index, linearisable on SQLite, PostgreSQL and Redis. Two workers that
each see the other may both let go; they try again on their next pass.

Cost: each admission reads the index's running runs (``list_runs``), so it
grows with the number of running runs in the log. Kafka is not supported:
its run index is owned per partition, so no worker sees the whole queue
(see docs/queues.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from agentlog.errors import ConfigError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.events import RunStatus, utcnow

__all__ = ["Queue", "check_queue", "queue_room"]


@dataclass(frozen=True)
class Queue:
    """A named queue whose runs are driven at most ``concurrency`` at a time.

    The limit holds across every worker of a fleet that shares one log
    (SQLite, PostgreSQL or Redis): a run counts while a writer holds its
    live lease, from the claim that starts (or continues) it until it ends,
    parks or is handed over.

    Args:
        name: the queue's name; workflows with a queue of the same name share
            its limit (give them the same ``concurrency``).
        concurrency: at most this many runs of the queue are driven at once.

    Raises:
        ConfigError: an empty name, or a concurrency that is not an int >= 1.
    """

    name: str
    concurrency: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"a queue needs a non-empty name, got {self.name!r}")
        limit = self.concurrency
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigError(
                f"queue {self.name!r}: concurrency must be an int >= 1 (the most runs "
                f"driven at once), got {limit!r}"
            )


class _Queued(Protocol):
    """What a queue check reads of a workflow (not imported: it imports us)."""

    @property
    def name(self) -> str: ...

    @property
    def queue(self) -> Queue | None: ...


def check_queue(log: EventLog, workflow: _Queued, registered: Iterable[_Queued]) -> None:
    """Refuse a queued workflow where its limit could not be kept.

    Raises:
        ConfigError: the log's runs are owned per partition by workers (Kafka),
            so no worker sees the whole queue; or another registered workflow
            has a queue of the same name with another limit.
    """
    queue = workflow.queue
    if queue is None:
        return
    if not log.direct_writes:
        raise ConfigError(
            f"workflow {workflow.name!r} is in queue {queue.name!r}, but this log's runs are "
            "owned by workers per partition (Kafka), so no worker can count the queue's "
            "running runs; use SQLite, PostgreSQL or Redis for queued workflows, or drop "
            "queue= and cap the workers with WorkerConfig.workflow_concurrency"
        )
    for other in registered:
        theirs = other.queue
        if theirs is None or other.name == workflow.name:
            continue
        if theirs.name == queue.name and theirs != queue:
            raise ConfigError(
                f"queue {queue.name!r} has concurrency {queue.concurrency} on workflow "
                f"{workflow.name!r} but {theirs.concurrency} on {other.name!r}; give every "
                "workflow of one queue the same Queue"
            )


async def queue_room(
    log: EventLog,
    queue: Queue,
    workflows: Iterable[str],
    *,
    claimed: str | None = None,
    now: datetime | None = None,
) -> bool:
    """True if the queue has room for one more driven run.

    Args:
        log: the log whose run index holds the leases.
        queue: the queue and its limit.
        workflows: the names of the workflows in the queue.
        claimed: a run this caller has just claimed: it is counted (once),
            and the answer says whether it may be driven.
        now: the time leases are judged at (default: now).
    """
    now = now or utcnow()
    names = set(workflows)
    live = {
        info.run_id
        for info in await log.list_runs(status=RunStatus.RUNNING)
        if info.workflow in names and info.lease_live(now)
    }
    if claimed is None:
        return len(live) < queue.concurrency
    live.add(claimed)
    return len(live) <= queue.concurrency
