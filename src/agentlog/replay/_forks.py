"""Forks, both ways: the run a fork came from, and the forks of a run.

A fork records where it came from in its own history (``RunForked``, after
the events it copied); the origin is never written to. So the run a fork
came from is read from the fork (:func:`fork_origin`), and the forks of a
run are found among the other runs (:func:`forks_of`): a fork's run index
row has its origin's workflow and starts (at its ``RunForked``) after its
origin started. Only the runs that fit both are read, and only their first
events; a shredded run is passed over, since its history is gone for good.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentlog.errors import AgentlogError
from agentlog.eventlog._base import EventReader
from agentlog.eventlog.events import RunForked, RunStatus, WriterClaimed
from agentlog.projector import load_state
from agentlog.replay._catalog import RunCatalog, RunRow
from agentlog.replay._timeline_window import CHUNK

__all__ = ["FORK_SCAN", "Forks", "fork_origin", "forks_of"]

#: How many events from seq 1 :func:`fork_origin` reads first: a run a writer
#: started records ``WriterClaimed`` among its first few events.
_FIRST_LOOK = 64
#: The most candidate runs (same workflow, updated since the origin started)
#: :func:`forks_of` looks through; past it the list says it is not complete.
FORK_SCAN = 5_000
_PAGE = 500


@dataclass(frozen=True)
class Forks:
    """The forks of one run that :func:`forks_of` found."""

    forks: list[dict[str, Any]]
    """``{"run_id", "seq", "status"}`` per fork (``seq``: the origin's seq it
    was forked at), newest update first."""
    complete: bool
    """False when more than :data:`FORK_SCAN` candidate runs were left unread,
    or a candidate could not be opened (sealed, and no key)."""

    def to_json(self) -> dict[str, Any]:
        """The forks as plain values."""
        return {"forks": self.forks, "complete": self.complete}


async def fork_origin(log: EventReader, run_id: str) -> dict[str, Any] | None:
    """``{"run_id", "seq"}`` of the run ``run_id`` was forked from, or None.

    A fork's first append is the history it copied (without
    ``WriterClaimed``) and its ``RunForked``; a run a writer started records
    ``WriterClaimed`` among its first events. So the first of the two
    decides, and the newest snapshot (taken after an append, so after a
    fork's ``RunForked``) decides for a long copied history.
    """
    after, size, checked_snapshot = 0, _FIRST_LOOK, False
    while True:
        last = after
        async for event in log.read(run_id, after_seq=after, upto_seq=after + size):
            # decided by the first marker: nothing past it is decoded
            if isinstance(event.data, RunForked):
                return {"run_id": event.data.origin_run_id, "seq": event.data.origin_seq}
            if isinstance(event.data, WriterClaimed):
                return None
            last = event.seq
        if last == after:
            return None
        after, size = last, CHUNK
        if not checked_snapshot:
            checked_snapshot = True
            snapshot = await log.load_snapshot(run_id)
            if snapshot is not None and snapshot.seq > after:
                state = await load_state(log, run_id, at_seq=snapshot.seq)
                return None if state.forked_from is None else dict(state.forked_from)


async def forks_of(
    catalog: RunCatalog, log: EventReader, origin: RunRow, *, scan: int = FORK_SCAN
) -> Forks:
    """The runs forked from ``origin`` (directly; a fork of a fork is listed
    on its own origin's page).

    Args:
        catalog: the runs, hot and archived.
        reader: reads a candidate's first events (the hot log and the archive).
        origin: the origin's index row.
        scan: the most candidate rows to look through.
    """
    found: list[dict[str, Any]] = []
    if origin.started_at is None:
        return Forks(found, True)
    offset = unreadable = 0
    while offset < scan:
        page = await catalog.page(
            workflow=origin.workflow,
            since=origin.started_at,
            offset=offset,
            limit=min(_PAGE, scan - offset),
        )
        for row in page.rows:
            if row.run_id == origin.run_id or row.started_at is None:
                continue
            if row.status == RunStatus.SHREDDED:  # no one can read where it came from
                continue
            if row.started_at < origin.started_at:
                continue
            try:
                came_from = await fork_origin(log, row.run_id)
            except AgentlogError:  # a run this reader cannot open (no key): unknown
                unreadable += 1
                continue
            if came_from is not None and came_from["run_id"] == origin.run_id:
                found.append({"run_id": row.run_id, "seq": came_from["seq"], "status": row.status})
        offset += len(page.rows)
        if not page.rows or offset >= page.total:
            return Forks(found, unreadable == 0)
    return Forks(found, False)
