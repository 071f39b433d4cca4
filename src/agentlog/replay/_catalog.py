"""The run list of hot and archived runs alike, a page at a time.

:meth:`RunCatalog.page` answers one page of the runs table (filters by
status, workflow, time range and run id text; counts by status; the total)
without loading every run: the hot log pages its own run index
(:meth:`~agentlog.eventlog._reader.EventReader.page_runs`, one indexed SQL query
on SQLite and PostgreSQL), and the archive's runs come from its manifest,
paged by DuckDB (:class:`~agentlog.archive._run_index.RunTable`).

A run is listed once. A run the archiver pruned keeps its hot index row (a
tombstone with ``archived`` set), which the hot log lists: it shows as
``where="archived"``; a hot run the archive holds events of shows as
``where="both"`` (:func:`~agentlog.archive._run_index.run_location`). Only
archived runs with no hot row at all (an archive read without its hot log,
or with another one) are listed from the archive itself; which those are is
worked out once per change of the manifest.

The two sources are merged in the list's one order (newest update first,
then run id): the page at ``offset`` takes from each source what ranks in
it, found by a binary search over the archive-only runs that asks the hot
log how many of its runs rank ahead of one (a count, not a read).
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentlog.archive import ArchiveStore
from agentlog.archive._run_index import ArchiveRunIndex, RunTable, run_location
from agentlog.crypto import KeyStore, PayloadCipher
from agentlog.eventlog._base import EventReader, RunInfo, RunQuery, RunsPage
from agentlog.eventlog._run_pages import order_key
from agentlog.eventlog.events import utcnow

__all__ = ["RunCatalog", "RunPage", "RunRow", "run_row"]

#: Run ids per query when asking the hot log which archived runs it has rows for.
_ID_CHUNK = 500


@dataclass(frozen=True)
class RunRow:
    """One run in the list."""

    run_id: str
    workflow: str
    version: str
    status: str
    started_at: datetime | None
    updated_at: datetime | None
    last_seq: int
    steps: int
    where: str
    """``"hot"``, ``"archived"`` or ``"both"`` (partly archived); see
    :func:`~agentlog.archive._run_index.run_location`."""
    queue: str = ""
    """The queue the run waits in or was admitted by, or "" (docs/queues.md)."""
    priority: int = 0
    """Its priority in that queue (lower first)."""
    waiting_for_room: bool = False
    """It waits for a slot in its queue (:meth:`RunInfo.waits_for_room`), when read."""

    def to_json(self) -> dict[str, Any]:
        """The row as plain values (times as ISO 8601 text)."""
        body = dataclasses.asdict(self)
        for name in ("started_at", "updated_at"):
            body[name] = body[name].isoformat() if body[name] is not None else None
        return body


def run_row(info: RunInfo, where: str) -> RunRow:
    """A :class:`RunRow` of an index row."""
    return RunRow(
        info.run_id,
        info.workflow,
        info.version,
        str(info.status),
        info.started_at,
        info.updated_at,
        info.last_seq,
        info.steps,
        where,
        info.queue,
        info.priority,
        info.waits_for_room(utcnow()),
    )


@dataclass(frozen=True)
class RunPage:
    """One page of the run list."""

    rows: list[RunRow]
    total: int
    """Runs that match every filter."""
    counts: dict[str, int]
    """Runs per status that match every filter but the status one (the status tabs)."""
    offset: int
    limit: int

    def to_json(self) -> dict[str, Any]:
        """The page as plain values."""
        return {
            "rows": [row.to_json() for row in self.rows],
            "total": self.total,
            "counts": dict(self.counts),
            "offset": self.offset,
            "limit": self.limit,
        }


class RunCatalog:
    """Hot and archived runs as one list, paged in the backends."""

    def __init__(
        self,
        log: EventReader | None,
        archive: ArchiveStore | None = None,
        *,
        keys: KeyStore | PayloadCipher | None = None,
    ) -> None:
        """List the runs of ``log`` (the caller's to close) and of ``archive``.

        ``keys`` are kept for :meth:`~agentlog.replay.RunHistory.open` of a
        listed run (the list itself reads metadata only).
        """
        self.log = log
        self.keys = keys
        self.archive_index = ArchiveRunIndex(archive) if archive is not None else None
        self._only = RunTable(())
        self._only_version = -1

    async def _archive_only(self) -> RunTable:
        """Archived runs the hot log has no row for (recomputed when the manifest changes)."""
        index = self.archive_index
        if index is None:
            return self._only
        await asyncio.to_thread(index.refresh)
        if index.version == self._only_version:
            return self._only
        infos = dict(index.infos)
        if self.log is not None:
            ids = list(infos)
            for start in range(0, len(ids), _ID_CHUNK):
                chunk = tuple(ids[start : start + _ID_CHUNK])
                page = await self.log.page_runs(RunQuery(run_ids=chunk, limit=len(chunk)))
                for info in page.rows:
                    infos.pop(info.run_id, None)
        self._only.close()
        self._only = await asyncio.to_thread(RunTable, infos.values())
        self._only_version = index.version
        return self._only

    async def _hot(self, query: RunQuery) -> RunsPage:
        if self.log is None:
            return RunsPage([], 0, {})
        return await self.log.page_runs(query)

    def _where(self, info: RunInfo) -> str:
        index = self.archive_index
        return run_location(info, index is not None and info.run_id in index)

    async def page(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        text: str | None = None,
        offset: int = 0,
        limit: int = 50,
    ) -> RunPage:
        """One page of the runs, newest update first.

        Args:
            status: only runs in this status.
            workflow: only runs of this workflow.
            since: only runs last updated at or after this time (UTC).
            until: only runs last updated before this time (UTC).
            text: only runs whose id contains this text.
            offset: how many matching runs to skip.
            limit: the page size.

        Raises:
            ConfigError: a negative offset or limit, or a naive datetime.
        """
        query = RunQuery(status, workflow, since, until, text or None, offset=offset, limit=limit)
        only = await self._archive_only()
        counted = dataclasses.replace(query, limit=0)
        cold = await asyncio.to_thread(only.page, counted) if len(only) else RunsPage([], 0, {})
        if not cold.total:  # the usual case: the hot index lists every run, in one query
            hot = await self._hot(query)
            rows = hot.rows
        else:
            hot = await self._hot(counted)
            if not hot.total:
                rows = (await asyncio.to_thread(only.page, query)).rows
            else:
                rows = await self._merged(query, only, hot.total, cold.total)
        counts = dict(hot.counts)
        for status_name, n in cold.counts.items():
            counts[status_name] = counts.get(status_name, 0) + n
        total = hot.total + cold.total
        return RunPage(
            [run_row(info, self._where(info)) for info in rows], total, counts, offset, limit
        )

    async def _merged(
        self, query: RunQuery, only: RunTable, hot_total: int, cold_total: int
    ) -> list[RunInfo]:
        """The page of both sources: archive-only runs ranked into the hot ones."""
        offset, limit = query.offset, query.limit
        if not limit:
            return []

        async def cold_at(i: int) -> RunInfo:
            one = dataclasses.replace(query, offset=i, limit=1)
            return (await asyncio.to_thread(only.page, one)).rows[0]

        async def hot_ahead(info: RunInfo) -> int:
            ahead = dataclasses.replace(query, before=(info.updated_at, info.run_id), limit=0)
            return (await self._hot(ahead)).total

        # The archive-only runs among the first `offset` of the merged list:
        # the smallest i whose run ranks at or past `offset` (i + hot runs ahead of it).
        lo, hi = max(0, offset - hot_total), min(offset, cold_total)
        while lo < hi:
            mid = (lo + hi) // 2
            if mid + await hot_ahead(await cold_at(mid)) >= offset:
                hi = mid
            else:
                lo = mid + 1
        cold = await asyncio.to_thread(only.page, dataclasses.replace(query, offset=lo))
        hot = await self._hot(dataclasses.replace(query, offset=offset - lo))
        merged = heapq.merge(
            cold.rows, hot.rows, key=lambda info: order_key(info.updated_at, info.run_id)
        )
        return list(merged)[:limit]

    async def workflows(self) -> list[str]:
        """Every workflow name of a listed run, sorted."""
        names = set(await self.log.list_workflows()) if self.log is not None else set()
        if self.archive_index is not None:
            await asyncio.to_thread(self.archive_index.refresh)
            names.update(info.workflow for info in self.archive_index.infos.values())
        return sorted(names)

    async def close(self) -> None:
        """Release the archive list's DuckDB connection (the hot log is the caller's)."""
        self._only.close()
