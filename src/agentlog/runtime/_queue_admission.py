"""How a worker reads a queue from the run index and decides to admit a run.

The rules are in :mod:`agentlog.runtime._queues`; this module reads what
they count (:func:`read_queue`), checks a claimed run against them
(:func:`admit`) and orders a worker's pass (:func:`arrange`).

Cost: on SQLite, PostgreSQL and Redis reading a queue is one round trip
(:class:`~agentlog.eventlog._queue_slots.QueueIndex`: two indexed queries,
or one script over Redis's queue sets): the runs holding a live lease (as
many as the writers) and the few best-ranked waiting runs the reader needs
(one for an admission, the room for a pass), so its cost does not grow with
the backlog. Elsewhere (memory, Kafka) it lists the run index's ``running``
and ``queued`` runs (``list_runs``). With a rate it also reads
the runs of the queue's workflows admitted within the rate's period (on
SQLite and PostgreSQL a range of the index of ``admitted_at``; elsewhere
the runs updated within the period, ``page_runs``). A worker reads each of
its queues once per pass and once per admission.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from agentlog.eventlog._base import EventLog, RunInfo
from agentlog.eventlog._queue_slots import QueueIndex, rank_of
from agentlog.eventlog._run_pages import RunQuery
from agentlog.eventlog._sql_index import SqlIndexedEventLog
from agentlog.eventlog.events import RunAdmitted, RunStatus, utcnow
from agentlog.runtime._queues import Queue

__all__ = ["QueueView", "admit", "arrange", "read_queue"]

#: Runs per page when counting a period's admissions.
_PAGE = 500


@dataclass(frozen=True)
class QueueView:
    """What a queue's limits count, read from the run index at one moment."""

    queue: Queue
    held: frozenset[str]
    """Runs of the queue a writer holds a live lease on (claimed or driven)."""
    claiming: frozenset[str]
    """Queued runs a writer holds: admissions under way."""
    admitted: frozenset[str]
    """Runs the queue admitted within the rate's period (empty without a rate)."""
    waiting: tuple[RunInfo, ...]
    """Queued runs no writer holds, best first (``_queue_slots.rank_of``);
    only the first ``limit`` of them when read with one."""
    holding: dict[str, RunInfo]
    """The runs of :attr:`held`, by id."""

    def room(self) -> float:
        """How many more runs the queue may admit now (inf: no limit)."""
        queue, free = self.queue, float("inf")
        if queue.concurrency is not None:
            free = queue.concurrency - len(self.held)
        if queue.rate is not None:
            free = min(free, queue.rate.runs - len(self.admitted | self.claiming))
        return max(free, 0)


async def read_queue(
    log: EventLog,
    queue: Queue,
    workflows: Iterable[str],
    now: datetime | None = None,
    *,
    limit: int | None = None,
) -> QueueView:
    """The queue as the run index says now; ``workflows`` are the names of
    the workflows in the queue (runs recorded before the index had a
    ``queue`` column count by them). ``limit``: how many waiting runs the
    caller needs (None: all), which a :class:`QueueIndex` reads alone."""
    now = now or utcnow()
    names = set(workflows)
    admitted: frozenset[str] = frozenset()
    if queue.rate is not None:
        admitted = await _admitted_since(log, names, now - queue.rate.per)
    if isinstance(log, QueueIndex) and limit is not None:
        holders, waiting = await log.queue_runs(queue.name, names, now, limit)
    else:

        def ours(info: RunInfo) -> bool:
            return info.queue == queue.name or info.workflow in names

        listed = [
            info
            for status in (RunStatus.RUNNING, RunStatus.QUEUED)
            for info in await log.list_runs(status=status)
            if ours(info)
        ]
        holders = [info for info in listed if info.lease_live(now)]
        waiting = sorted(
            (i for i in listed if i.status == RunStatus.QUEUED and not i.lease_live(now)),
            key=rank_of,
        )[:limit]
    return QueueView(
        queue=queue,
        held=frozenset(i.run_id for i in holders),
        claiming=frozenset(i.run_id for i in holders if i.status == RunStatus.QUEUED),
        admitted=admitted,
        waiting=tuple(waiting),
        holding={i.run_id: i for i in holders},
    )


async def _admitted_since(
    log: EventLog, workflows: Collection[str], since: datetime
) -> frozenset[str]:
    """The runs of ``workflows`` admitted after ``since``: each was updated
    at or after its admission, so the runs updated since then hold them all
    (a SQL run index answers from its index of ``admitted_at`` instead)."""
    if isinstance(log, SqlIndexedEventLog):
        return await log.admitted_since(workflows, since)
    found: set[str] = set()
    for workflow in sorted(workflows):
        offset = 0
        while True:
            query = RunQuery(workflow=workflow, since=since, offset=offset, limit=_PAGE)
            page = await log.page_runs(query)
            found.update(
                i.run_id for i in page.rows if i.admitted_at is not None and i.admitted_at > since
            )
            if len(page.rows) < _PAGE:
                break
            offset += _PAGE
    return frozenset(found)


async def admit(
    log: EventLog, queue: Queue, workflows: Iterable[str], run_id: str
) -> RunAdmitted | bool:
    """May the run that this caller has just claimed be driven now?

    False: not now (let it go; it stays queued). True: yes, and it was
    admitted before (it resumes, or continues after its worker died).
    A :class:`RunAdmitted`: yes, for the first time; record it before the
    run acts.
    """
    view = await read_queue(log, queue, workflows, limit=1)
    held = view.held | {run_id}
    if queue.concurrency is not None and len(held) > queue.concurrency:
        return False
    me = view.holding.get(run_id) or await log.get_run(run_id)
    if me.status != RunStatus.QUEUED:
        return True  # admitted before: only the concurrency limit applies
    if queue.rate is not None and len(view.admitted | view.claiming | {run_id}) > queue.rate.runs:
        return False
    if view.waiting and rank_of(view.waiting[0]) < rank_of(me):
        return False  # a run ranked ahead of it waits: that one first
    return RunAdmitted(queue.name)


async def arrange(
    log: EventLog,
    due: Sequence[RunInfo],
    queues: dict[str, tuple[Queue, list[str]]],
    queue_of: dict[str, str],
    free: int,
) -> list[RunInfo]:
    """A worker pass's runs to take, in order: ``due`` (the log's runnable
    runs) with each queue's runs replaced by the ones its queue has room for.

    A queue's started runs that need a worker again come first (their worker
    died, or they resumed), then its queued runs best first, up to its room.
    A queued run beyond ``due`` (which is bounded) is found here too.

    Args:
        queues: each queue by name, with the names of its workflows.
        queue_of: the queue's name of each queued workflow registered here.
        free: how many runs the worker has room for.
    """
    kept = [
        info for info in due if info.workflow not in queue_of or info.status == RunStatus.WAITING
    ]
    now = utcnow()
    for name, (queue, workflows) in queues.items():
        wanted = _wanted(queue, free) if log.direct_writes else None  # Kafka: filter first
        view = await read_queue(log, queue, workflows, now, limit=wanted)
        again = [
            info
            for info in due
            if queue_of.get(info.workflow) == name and info.status == RunStatus.RUNNING
        ]
        room = view.room()
        if queue.concurrency is not None:
            slots = max(queue.concurrency - len(view.held), 0)
            again = again[:slots]
            room = min(room, slots - len(again))
        kept += again
        ready = [info for info in view.waiting if info.workflow in workflows]
        if not log.direct_writes:  # its runs are owned per partition: only ours (Kafka)
            ours = {info.run_id for info in due}
            ready = [info for info in ready if info.run_id in ours]
        kept += ready[: int(min(room, free))]
    return kept


def _wanted(queue: Queue, free: int) -> int:
    """How many of a queue's waiting runs a pass may take at most."""
    room = float(free)
    if queue.concurrency is not None:
        room = min(room, queue.concurrency)
    if queue.rate is not None:
        room = min(room, queue.rate.runs)
    return int(room)
