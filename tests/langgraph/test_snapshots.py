"""A thread's latest checkpoint is its latest snapshot plus the tail: the cost
of a cold read, and the bytes of its snapshots, follow the delta, not the
thread's length.

Counted, not timed: a SqliteEventLog that counts what it hands out stands
in for the log (the real backend, with a tally).
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from agentlog.eventlog._base import Event, Snapshot
from agentlog.eventlog._indexed import ColdRead
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.langgraph import AgentlogSaver
from agentlog.projector._snapshots import load_state

INTERVAL = 20
WORDS = ["durable", "agent", "log", "kafka", "sqlite", "replay", "snapshot", "delta", "fence"]


class CountingLog(SqliteEventLog):
    """SqliteEventLog that counts the events and snapshot bytes it reads and writes."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.events_read = 0
        self.snapshots_loaded = 0
        self.snapshot_bytes_loaded = 0
        self.snapshot_bytes_saved = 0

    async def read(
        self, run_id: str, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> AsyncIterator[Event]:
        async for event in super().read(run_id, after_seq=after_seq, upto_seq=upto_seq):
            self.events_read += 1
            yield event

    def cold_read(
        self, run_id: str, *, upto_seq: int | None = None, snapshots: bool = True
    ) -> ColdRead | None:
        # a saver's first read: the newest snapshot's chain and the events after it
        found = super().cold_read(run_id, upto_seq=upto_seq, snapshots=snapshots)
        if found is not None:
            self.events_read += len(found.rows)
            self.snapshots_loaded += len(found.snapshots)
            self.snapshot_bytes_loaded += sum(len(s.state) for s in found.snapshots)
        return found

    async def load_snapshot(
        self, run_id: str, *, at_or_before: int | None = None
    ) -> Snapshot | None:
        found = await super().load_snapshot(run_id, at_or_before=at_or_before)
        if found is not None:
            self.snapshots_loaded += 1
            self.snapshot_bytes_loaded += len(found.state)
        return found

    async def save_snapshot(self, snapshot: Snapshot) -> None:
        self.snapshot_bytes_saved += len(snapshot.state)
        await super().save_snapshot(snapshot)


def cfg(thread_id: str, checkpoint_id: str | None = None) -> Any:
    configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def grow(saver: AgentlogSaver, thread_id: str, steps: int, *, messages: bool) -> list[str]:
    """Save ``steps`` checkpoints, as a LangGraph loop would: each changes a
    counter and a note and (with ``messages``) appends a message; returns the list."""
    rng = random.Random(7)
    values: dict[str, Any] = {"messages": []} if messages else {}
    versions: dict[str, Any] = {}
    parent: str | None = None
    for step in range(steps):
        changed = {"count": step, "note": f"step {step}"}
        if messages:
            text = " ".join(rng.choice(WORDS) for _ in range(60))
            changed["messages"] = [*values["messages"], text]
        values.update(changed)
        for channel in changed:
            versions[channel] = saver.get_next_version(versions.get(channel), None)
        saved = empty_checkpoint()
        saved["channel_values"] = dict(values)
        saved["channel_versions"] = dict(versions)
        stored = saver.put(
            cfg(thread_id, parent),
            saved,
            {"source": "loop", "step": step},
            {channel: versions[channel] for channel in changed},
        )
        parent = stored["configurable"]["checkpoint_id"]
    return list(values.get("messages", []))


def cold_read(path: Path, thread_id: str) -> tuple[CountingLog, Any]:
    """A new saver (a new process) reads the thread's latest checkpoint."""
    counted = CountingLog(path)
    with AgentlogSaver(counted, snapshot_every=INTERVAL) as saver:
        latest = saver.get_tuple(cfg(thread_id))
    return counted, latest


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "agentlog.db"


@pytest.mark.parametrize("steps", [200, 800])
def test_a_cold_read_of_the_latest_checkpoint_reads_one_interval(db: Path, steps: int) -> None:
    with AgentlogSaver(SqliteEventLog(db), snapshot_every=INTERVAL) as saver:
        grow(saver, "t", steps, messages=False)
    counted, latest = cold_read(db, "t")
    assert latest is not None
    assert latest.checkpoint["channel_values"] == {"count": steps - 1, "note": f"step {steps - 1}"}
    assert latest.metadata["step"] == steps - 1
    assert counted.events_read < INTERVAL
    # One snapshot, of the latest checkpoint only: not one entry per checkpoint.
    # (Whole-thread snapshots were ~300 bytes per checkpoint: 60 KB at 200.)
    assert counted.snapshots_loaded <= 16
    assert counted.snapshot_bytes_loaded < 16 * 2_000, counted.snapshot_bytes_loaded


@pytest.mark.parametrize("steps", [200, 330])
def test_a_cold_read_of_a_bounded_state_loads_one_snapshot(db: Path, steps: int) -> None:
    """Issue 23 item 8: a state that does not grow replaces its values at every
    step, so a delta snapshot would hold as much as a base: each snapshot
    stands alone, and opening the thread reads one snapshot, not a chain of
    up to 16 (one more read of the store per link)."""
    with AgentlogSaver(SqliteEventLog(db), snapshot_every=INTERVAL) as saver:
        grow(saver, "t", steps, messages=False)
    counted, latest = cold_read(db, "t")
    assert latest is not None
    assert latest.checkpoint["channel_values"] == {"count": steps - 1, "note": f"step {steps - 1}"}
    assert counted.snapshots_loaded == 1, f"{counted.snapshots_loaded} snapshots loaded"
    assert counted.events_read < INTERVAL


def test_a_message_list_is_stored_about_once_across_snapshots(db: Path) -> None:
    counted = CountingLog(db)
    with AgentlogSaver(counted, snapshot_every=INTERVAL) as saver:
        messages = grow(saver, "t", 400, messages=True)
    text = sum(len(m) for m in messages)
    # 20 snapshots of a list that grows to 400 messages. Each whole would be
    # ~10 copies of it; a chain stores each message once per base (every 16).
    assert counted.snapshot_bytes_saved < 2 * text, (counted.snapshot_bytes_saved, text)
    counted, latest = cold_read(db, "t")
    assert latest is not None and latest.checkpoint["channel_values"]["messages"] == messages
    assert counted.events_read < INTERVAL
    assert 1 < counted.snapshots_loaded <= 16  # a growing list is worth its chain


def test_old_checkpoints_and_list_read_the_history(db: Path) -> None:
    with AgentlogSaver(SqliteEventLog(db), snapshot_every=INTERVAL) as saver:
        messages = grow(saver, "t", 90, messages=True)
        history = [t.config["configurable"]["checkpoint_id"] for t in saver.list(cfg("t"))]
    assert len(history) == 90
    with AgentlogSaver(SqliteEventLog(db), snapshot_every=INTERVAL) as saver:
        assert [t.config["configurable"]["checkpoint_id"] for t in saver.list(cfg("t"))] == history
        oldest = saver.get_tuple(cfg("t", history[-1]))
        assert oldest is not None
        assert oldest.checkpoint["channel_values"]["messages"] == messages[:1]
        middle = saver.get_tuple(cfg("t", history[45]))
        assert middle is not None and middle.checkpoint["channel_values"]["count"] == 44
        # A fork from an old checkpoint (time travel) builds on that checkpoint's values.
        forked = empty_checkpoint()
        forked["channel_values"] = {"count": -1}
        forked["channel_versions"] = {
            **middle.checkpoint["channel_versions"],
            "count": saver.get_next_version(middle.checkpoint["channel_versions"]["count"], None),
        }
        saver.put(
            middle.config,
            forked,
            {"source": "update", "step": 45},
            {"count": forked["channel_versions"]["count"]},
        )
        latest = saver.get_tuple(cfg("t"))
        assert latest is not None
        assert latest.checkpoint["channel_values"]["messages"] == messages[:45]
        assert latest.checkpoint["channel_values"]["count"] == -1


async def test_agentlog_state_reads_a_thread_without_ignoring_its_snapshots(
    db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with AgentlogSaver(SqliteEventLog(db), snapshot_every=INTERVAL) as saver:
        grow(saver, "t", 60, messages=False)
    async with SqliteEventLog(db) as event_log:
        with caplog.at_level("INFO"):
            state = await load_state(event_log, "t")
    assert state.values["count"] == 59
    assert "snapshot ignored" not in caplog.text
