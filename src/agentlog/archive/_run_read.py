"""One run as the archiver read it from the hot log, and how it goes into a file.

A SQL log (SQLite, PostgreSQL) gives its stored rows, checksums verified
(:meth:`~agentlog.eventlog._indexed.IndexedEventLog.read_rows`); any other
log gives decoded events, with each payload's stored bytes where it keeps
them. :meth:`RunRead.add_to` adds either to a file's
:class:`~agentlog.archive._rows.Columns` and gives the manifest segment
they form.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agentlog.archive._parquet import Segment
from agentlog.archive._rows import Columns
from agentlog.crypto import PayloadCipher
from agentlog.eventlog._base import RunInfo
from agentlog.eventlog._indexed import StoredPayload
from agentlog.eventlog._row_format import from_us
from agentlog.eventlog.events import Event, RunStarted, RunStatus

__all__ = ["RunRead"]


@dataclasses.dataclass(eq=False)
class RunRead:
    """What the archiver read of one run: stored rows (:attr:`rows`), or
    decoded events each with its stored payload or None (:attr:`events`)."""

    info: RunInfo
    rows: list[tuple[Any, ...]] | None = None
    events: list[Event] = dataclasses.field(default_factory=list)
    stored: list[StoredPayload] = dataclasses.field(default_factory=list)

    def first_seq(self) -> int | None:
        """The first seq read, None if nothing was."""
        if self.rows is not None:
            return self.rows[0][0] if self.rows else None
        return self.events[0].seq if self.events else None

    def add_to(
        self,
        columns: Columns,
        previous: Segment | None,
        *,
        cipher: PayloadCipher | None,
        where: str,
    ) -> Segment:
        """Add the run's rows to ``columns``; the segment they form (its status
        and steps carried on from ``previous``, the run's last archived segment)."""
        info = self.info
        workflow, version = info.workflow, info.version
        status = previous.status if previous else RunStatus.RUNNING
        steps = previous.steps if previous else 0
        if self.rows is None:
            wf, ver = workflow, version
            for event, raw in zip(self.events, self.stored, strict=True):
                if isinstance(event.data, RunStarted):
                    wf, ver = event.data.workflow, event.data.version
                columns.add_event(event, raw, wf, ver)
            return Segment.of(
                self.events,
                workflow=workflow,
                version=version,
                status=status,
                steps=steps,
                started_at=info.started_at,
            )
        _, _, status, steps = columns.add_rows(
            info.run_id,
            self.rows,
            workflow=workflow,
            version=version,
            status=status,
            steps=steps,
            cipher=cipher,
            where=where,
        )
        first, last = self.rows[0], self.rows[-1]
        return Segment(
            info.run_id,
            first[0],
            last[0],
            workflow,
            version,
            status,
            steps,
            info.started_at.isoformat() if info.started_at else None,
            from_us(last[2]).isoformat(),
        )
