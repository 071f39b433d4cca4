"""Builders of events shared by the contract suites."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agentlog.eventlog.base import EventLog
from agentlog.eventlog.events import (
    Event,
    EventData,
    InterruptRaised,
    ResumeReceived,
    RunCompleted,
    RunStarted,
    StepCompleted,
    StepFailed,
    SuperstepCommitted,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
    WriterClaimed,
)

_T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def ev(run_id: str, seq: int, data: EventData | None = None, epoch: int = 0) -> Event:
    """An event with a deterministic timestamp (one second per seq)."""
    data = data if data is not None else TaskCompleted(key=f"k{seq}", result=seq)
    return Event(run_id, seq, data, ts=_T0 + timedelta(seconds=seq), writer_epoch=epoch)


def started(workflow: str = "wf") -> RunStarted:
    return RunStarted(workflow, "1.0", {"q": "hi"}, "sync", "fp1", {"steps": 10}, ["a"])


async def read_all(log: EventLog, run_id: str, **kwargs: Any) -> list[Event]:
    return [event async for event in log.read(run_id, **kwargs)]


async def seed(log: EventLog, run_id: str, count: int, epoch: int = 0) -> list[Event]:
    """Append ``count`` events to a fresh run; return them."""
    events = [ev(run_id, seq, epoch=epoch) for seq in range(1, count + 1)]
    await log.append(events)
    return events


def every_event_type(run_id: str) -> list[Event]:
    payloads: list[EventData] = [
        started(),
        WriterClaimed(epoch=0, owner="host:1"),
        TaskStarted("key-1", "fetch", "a", 1, 0, 0),
        TaskCompleted("key-1", {"uuid-ish": b"\x00\xff", "n": [1, 2.5, None]}, 12.5),
        TaskFailed("key-2", "ValueError: nope", 2, 3.0),
        StepCompleted("a", 1, 0, {"messages": ["x"], "count": 1}, ["b"]),
        StepFailed("b", 2, 0, 1, "boom", retryable=False),
        SuperstepCommitted(1, ["b"]),
        InterruptRaised("b", 2, 0, 0, {"question": "ok?"}),
        ResumeReceived({"answer": True}),
        RunCompleted({"done": True}),
    ]
    return [
        Event(run_id, seq, data, ts=_T0 + timedelta(microseconds=seq))
        for seq, data in enumerate(payloads, start=1)
    ]


_REPO = Path(__file__).resolve().parents[2]


def race_in_processes(url: str, writers: int, claims: int, appends: int) -> list[Any]:
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.contract.writer_proc",
                url,
                "race",
                f"w{i}",
                str(claims),
                str(appends),
            ],
            cwd=_REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(writers)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()  # bounded by the test's timeout
            assert line == "ready\n", (line, proc.stderr.read() if proc.stderr else "")
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            results.append([tuple(pair) for pair in json.loads(out)])
        return results
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
