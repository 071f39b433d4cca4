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
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow.compute as pc

from agentlog.archive._parquet import Segment, encode_parquet
from agentlog.archive._rows import Columns
from agentlog.archive._tasks_fold import tasks_of
from agentlog.archive._tasks_table import encode_tasks_table
from agentlog.crypto import PayloadCipher
from agentlog.eventlog._base import RunInfo
from agentlog.eventlog._indexed import StoredPayload
from agentlog.eventlog._row_format import from_us
from agentlog.eventlog.events import Event, RunStarted, RunStatus

__all__ = ["RunRead", "encode_file"]

#: Bytes the hot store spends per event besides the payload (envelope + index),
#: used for the "before" figure of the summary; an estimate, not a measurement.
_ENVELOPE_BYTES = 24


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


def encode_file(
    reads: Sequence[RunRead],
    previous: Sequence[Segment | None],
    cipher: PayloadCipher | None,
    where: str,
    row_group_size: int,
) -> tuple[bytes, bytes, int, int, list[Segment]]:
    """One archive file of ``reads`` (each run after its ``previous`` segment):
    its Parquet bytes, its tasks table's, rows, the hot bytes they stood for
    (an estimate) and the segments.

    The events file is written on a second thread (Arrow's Parquet writer
    releases the GIL) while this one folds and writes the tasks table
    (:func:`~agentlog.archive._tasks_fold.tasks_of`), so a second core takes
    the larger part.
    """
    columns = Columns()
    segments = [
        read.add_to(columns, before, cipher=cipher, where=where)
        for read, before in zip(reads, previous, strict=True)
    ]
    table = columns.table()
    with ThreadPoolExecutor(1, thread_name_prefix="agentlog-archive-parquet") as pool:
        events = pool.submit(encode_parquet, table, row_group_size=row_group_size)
        tasks_raw = encode_tasks_table(tasks_of(columns), row_group_size=row_group_size)
        raw = events.result()
    payload_bytes = pc.sum(pc.binary_length(table.column("payload"))).as_py() or 0
    envelope = sum(len(r) for r in columns.run_ids) + _ENVELOPE_BYTES * len(columns)
    return raw, tasks_raw, len(table), payload_bytes + envelope, segments
