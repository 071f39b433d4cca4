"""A SQL log's full fold folds steps and commits from their stored maps (issue 23 item 8)."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import pytest

from agentlog.errors import CorruptEventError
from agentlog.eventlog import open_log
from agentlog.eventlog._builders import build_event, build_payload
from agentlog.eventlog.codec import pack, row_checksum
from agentlog.eventlog.events import (
    Event,
    RunStarted,
    StepCompleted,
    SuperstepCommitted,
    TaskCompleted,
    TaskStarted,
)
from agentlog.projector import fold, load_state

RUN = "r"


def _history(supersteps: int) -> list[Event]:
    events = [Event(RUN, 1, RunStarted("w", "1", {"n": 0}, "async", "fp", start=["s"]))]
    for superstep in range(supersteps):
        seq = len(events) + 1
        writes = {"n": superstep, "last": {"role": "ai", "text": "x" * superstep}}
        goto: list[Any] = [{"step": "s", "arg": 1}] if superstep == 3 else ["s"]  # a Send
        events.append(Event(RUN, seq, StepCompleted("s", superstep, 0, writes, goto)))
        events.append(Event(RUN, seq + 1, SuperstepCommitted(superstep, ["s"])))
    return events


@contextmanager
def _calls_of(*codes: CodeType) -> Iterator[list[int]]:
    """Count the calls of the functions with ``codes`` on this thread."""
    count = [0]

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code in codes:
            count[0] += 1

    sys.setprofile(profile)
    try:
        yield count
    finally:
        sys.setprofile(None)


async def test_a_full_fold_builds_no_payload_for_plain_steps_and_commits(tmp_path: Path) -> None:
    events = _history(100)
    log = await open_log(f"sqlite:///{tmp_path / 'log.db'}")
    try:
        await log.append(events)
        with _calls_of(build_payload.__code__, build_event.__code__) as built:
            state = await load_state(log, RUN, use_snapshots=False)
    finally:
        await log.close()
    assert state == fold(events)
    # RunStarted, and the step whose goto holds a Send: decoded as before
    assert built[0] == 2 * 2


async def test_a_full_fold_builds_no_payload_for_completed_tasks(tmp_path: Path) -> None:
    events = _history(4)
    for call in range(20):
        seq = len(events) + 1
        events.append(Event(RUN, seq, TaskStarted(f"k{call}", "t", "s", 4, 0, call)))
        result = {"n": call} if call % 2 else [call]
        duration: float = 1.5 if call % 3 else call  # an int duration decodes as one
        events.append(Event(RUN, seq + 1, TaskCompleted(f"k{call}", result, duration)))
    events.append(Event(RUN, len(events) + 1, TaskCompleted("k-none", None)))
    log = await open_log(f"sqlite:///{tmp_path / 'log.db'}")
    try:
        await log.append(events)
        with _calls_of(build_payload.__code__) as built:
            state = await load_state(log, RUN, use_snapshots=False)
    finally:
        await log.close()
    assert state == fold(events)
    # RunStarted, the step whose goto holds a Send, and the 20 TaskStarted
    assert built[0] == 2 + 20


async def test_a_step_that_does_not_decode_is_still_a_corrupt_event(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    log = await open_log(f"sqlite:///{path}")
    await log.append(_history(10))
    await log.close()
    bad = pack({"step": "s", "superstep": 4, "branch": 0, "writes": ["not", "a", "map"]})
    with sqlite3.connect(path) as conn:
        ts, epoch = conn.execute("SELECT ts, writer_epoch FROM events WHERE seq = 10").fetchone()
        checksum = row_checksum(RUN, 10, "StepCompleted", ts, 1, epoch, bad)
        conn.execute("UPDATE events SET payload = ?, checksum = ? WHERE seq = 10", (bad, checksum))
    log = await open_log(f"sqlite:///{path}")
    try:
        with pytest.raises(CorruptEventError) as caught:
            await load_state(log, RUN, use_snapshots=False)
    finally:
        await log.close()
    assert caught.value.seq == 10
    assert "writes" in str(caught.value)
