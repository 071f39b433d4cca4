"""Small reads are served on the caller's thread, not the worker thread's (issue 23 item 8).

A resume (the run's index row, its latest snapshot, the events after it) and
a LangGraph ``get_tuple`` made a hop to the log's worker thread for each
query, about 100 µs each on a loaded machine against queries of tens of
microseconds. Pinned by what happens, never by timing: with the worker
thread held busy, a resume still completes, sees every committed event, and
the log's writes go on once the thread is free.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from agentlog.eventlog import Event, RunStarted, StepCompleted
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.projector import fold, load_state, save_state

_GENEROUS = 60.0


def _events(count: int) -> list[Event]:
    events = [Event("r", 1, RunStarted("r", "1", {}, "async", "fp", start=["s"]))]
    events += [
        Event("r", seq, StepCompleted("s", seq, 0, {"n": seq}, ["s"]))
        for seq in range(2, count + 1)
    ]
    return events


async def test_a_resume_needs_no_hop_to_the_busy_worker_thread(tmp_path: Path) -> None:
    log = SqliteEventLog(tmp_path / "log.db")
    events = _events(40)
    released = threading.Event()
    try:
        await log.append(events[:30])
        await save_state(log, fold(events[:30]))
        await log.append(events[30:])

        def hold() -> None:
            released.wait(10 * _GENEROUS)

        log._worker.post(hold)  # the worker thread held busy
        try:
            info = await asyncio.wait_for(log.find_run("r"), _GENEROUS)
            state = await asyncio.wait_for(load_state(log, "r"), _GENEROUS)
        finally:
            released.set()
        assert info is not None and info.last_seq == 40
        assert state == fold(events)
        await log.append([Event("r", 41, StepCompleted("s", 41, 0, {"n": 41}, ["s"]))])
        assert (await load_state(log, "r")).seq == 41
    finally:
        released.set()
        await log.close()


async def test_a_read_sees_what_another_instance_committed(tmp_path: Path) -> None:
    """A reader's own connection reads the last commit, whoever made it."""
    reader, writer = SqliteEventLog(tmp_path / "log.db"), SqliteEventLog(tmp_path / "log.db")
    try:
        events = _events(5)
        await writer.append(events[:3])
        assert [e.seq async for e in reader.read("r")] == [1, 2, 3]
        await writer.append(events[3:])
        assert [e.seq async for e in reader.read("r")] == [1, 2, 3, 4, 5]
        info = await reader.find_run("r")
        assert info is not None and info.last_seq == 5
    finally:
        await reader.close()
        await writer.close()


async def test_last_seq_here_reads_on_threads_that_come_and_go_from_a_pool(
    tmp_path: Path,
) -> None:
    """``last_seq_here`` serves any thread with no loop, and threads that come
    and go share a pool of read connections instead of keeping one each."""
    log = SqliteEventLog(tmp_path / "log.db")
    try:
        await log.append(_events(5))
        opened = len(log._reads._opened)
        seen: list[int | None] = []
        for _ in range(20):  # one after another: one pooled connection serves them all
            reader = threading.Thread(target=lambda: seen.append(log.last_seq_here("r")))
            reader.start()
            reader.join(_GENEROUS)
        assert seen == [5] * 20
        assert len(log._reads._opened) == opened + 1
        assert log.last_seq_here("nobody") is None
        await log.append([Event("r", 6, StepCompleted("s", 6, 0, {"n": 6}, ["s"]))])
        assert log.last_seq_here("r") == 6
    finally:
        await log.close()
