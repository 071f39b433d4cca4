"""The indexed read path fetches a run's next batch while the reader folds this one.

Issue 23 item 8: reading and folding took turns (the store idle while the
loop decoded and folded a batch, the loop idle while the store fetched the
next). Pinned by the order of what happens, on a real SQLite file: the query
for batch 2 is handed to the store before the reader sees the first event of
batch 1. Stopping early cancels the fetch ahead and leaves the log usable.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentlog.eventlog.events import Event, TaskCompleted
from agentlog.eventlog.sqlite import SqliteEventLog

_BATCH = 10


class _Recording(SqliteEventLog):
    """A SQLite log that records when each batch's query starts (the first on
    the caller's thread, the ones fetched ahead on the worker thread)."""

    journal: list[tuple[str, int]]

    async def _event_rows(self, run_id: str, after: int, last: int, limit: int) -> Sequence[Any]:
        self.journal.append(("fetch", after))
        return await super()._event_rows(run_id, after, last, limit)

    async def _event_rows_ahead(
        self, run_id: str, after: int, last: int, limit: int
    ) -> Sequence[Any]:
        self.journal.append(("fetch", after))
        return await super()._event_rows_ahead(run_id, after, last, limit)


async def _filled(path: Path, count: int) -> _Recording:
    log = _Recording(path)
    log.read_batch, log.journal = _BATCH, []
    await log.append([Event("r", s, TaskCompleted(f"k{s}", s)) for s in range(1, count + 1)])
    return log


async def test_the_next_batch_is_fetched_before_this_one_is_read(tmp_path: Path) -> None:
    log = await _filled(tmp_path / "log.db", 3 * _BATCH)
    try:
        seqs = []
        async for event in log.read("r"):
            log.journal.append(("event", event.seq))
            seqs.append(event.seq)
        assert seqs == list(range(1, 3 * _BATCH + 1))
        fetches = [after for what, after in log.journal if what == "fetch"]
        assert fetches == [0, _BATCH, 2 * _BATCH]
        first_event = log.journal.index(("event", 1))
        second_fetch = log.journal.index(("fetch", _BATCH))
        assert second_fetch < first_event, (
            f"batch 2 was fetched only after the reader saw event 1: {log.journal[:14]}"
        )
    finally:
        await log.close()


async def test_a_reader_that_stops_early_leaves_the_log_usable(tmp_path: Path) -> None:
    log = await _filled(tmp_path / "log.db", 3 * _BATCH)
    try:
        reader = log.read("r")
        async for event in reader:
            if event.seq == 3:
                break
        await reader.aclose()
        assert [e.seq async for e in log.read("r", after_seq=25)] == [26, 27, 28, 29, 30]
        await log.append([Event("r", 31, TaskCompleted("k31", 31))])
        assert (await log.get_run("r")).last_seq == 31
    finally:
        await log.close()


async def test_read_rows_fetches_the_next_batch_before_this_one_is_used(tmp_path: Path) -> None:
    log = await _filled(tmp_path / "log.db", 3 * _BATCH)
    try:
        seqs = []
        async for rows in log.read_rows("r"):
            log.journal.append(("rows", rows[0][0]))
            seqs += [row[0] for row in rows]
        assert seqs == list(range(1, 3 * _BATCH + 1))
        fetches = [after for what, after in log.journal if what == "fetch"]
        assert fetches == [0, _BATCH, 2 * _BATCH]
        assert log.journal.index(("fetch", _BATCH)) < log.journal.index(("rows", 1)), (
            f"batch 2 was fetched only after the reader had batch 1: {log.journal}"
        )
    finally:
        await log.close()


async def test_a_rows_reader_that_stops_early_leaves_the_log_usable(tmp_path: Path) -> None:
    log = await _filled(tmp_path / "log.db", 3 * _BATCH)
    try:
        reader = log.read_rows("r")
        async for _rows in reader:
            break
        await reader.aclose()
        tail = [row[0] async for rows in log.read_rows("r", after_seq=25) for row in rows]
        assert tail == [26, 27, 28, 29, 30]
        await log.append([Event("r", 31, TaskCompleted("k31", 31))])
        assert (await log.get_run("r")).last_seq == 31
    finally:
        await log.close()
