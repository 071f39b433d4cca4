"""A list channel stored as a chain of deltas: never a chain that loops.

A list that grew by appending is stored as the new items plus the version
they extend. LangGraph may list versions that did not change in a ``put``
(its checkpoint-migration tests re-save checkpoints that way); such a
channel must keep its value, and a chain that loops in stored bytes is a
typed error on read, not a read that never ends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from agentlog.errors import CorruptEventError
from agentlog.eventlog._base import Event
from agentlog.eventlog.events import LANGGRAPH_WORKFLOW, CheckpointSaved, RunStarted
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.langgraph import AgentlogSaver, StrictSerializer

#: A hang guard: a read of a chain that loops would never return (nor would the
#: saver close, so the guard ends the process, showing where it hung).
pytestmark = pytest.mark.timeout(60, method="thread")


def cfg(thread_id: str, checkpoint_id: str | None = None) -> Any:
    configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def put(
    saver: AgentlogSaver,
    parent: str | None,
    values: dict[str, Any],
    versions: dict[str, str],
    listed: dict[str, str],
) -> str:
    """Save a checkpoint of thread t1 with ``versions``, listing ``listed`` as new."""
    saved = empty_checkpoint()
    saved["channel_values"] = dict(values)
    saved["channel_versions"] = dict(versions)
    stored = saver.put(cfg("t1", parent), saved, {"source": "loop", "step": 0}, listed)
    return str(stored["configurable"]["checkpoint_id"])


def test_a_put_that_lists_unchanged_versions_keeps_every_value(log_url: str) -> None:
    with AgentlogSaver.from_url(log_url) as saver:
        first = put(saver, None, {"m": ["a"]}, {"m": "1"}, {"m": "1"})
        second = put(saver, first, {"m": ["a", "b"]}, {"m": "2"}, {"m": "2"})
        # The re-save: every channel listed, though only "n" changed.
        versions = {"m": "2", "n": "1"}
        third = put(saver, second, {"m": ["a", "b"], "n": 7}, versions, versions)
    with AgentlogSaver.from_url(log_url) as fresh:  # nothing cached: read from the log
        seen = {
            t.config["configurable"]["checkpoint_id"]: t.checkpoint["channel_values"]
            for t in fresh.list(cfg("t1"))
        }
    assert seen == {
        first: {"m": ["a"]},
        second: {"m": ["a", "b"]},
        third: {"m": ["a", "b"], "n": 7},
    }


async def test_a_stored_chain_that_loops_is_corrupt_not_a_hang(tmp_path: Path) -> None:
    """Bytes the saver stored before this was fixed: a delta whose base is its own version."""
    kind, raw = StrictSerializer().dumps_typed([])
    looped = CheckpointSaved(
        ns="",
        checkpoint_id="c1",
        parent_id=None,
        checkpoint={"v": 4, "channel_versions": {"m": "1"}, "versions_seen": {}},
        metadata={"source": "loop", "step": 0},
        values=[["m", "1", kind, raw, "1"]],
    )
    started = RunStarted(
        workflow=LANGGRAPH_WORKFLOW, version="", input=None, durability="sync", fingerprint=""
    )
    path = tmp_path / "agentlog.db"
    async with SqliteEventLog(path) as event_log:
        epoch = await event_log.claim_writer("t1", owner="test", force=True)
        events = [
            Event("t1", 1, started, writer_epoch=epoch),
            Event("t1", 2, looped, writer_epoch=epoch),
        ]
        await event_log.append(events, durable=True)
    async with AgentlogSaver.from_url(f"sqlite:///{path}") as saver:
        with pytest.raises(
            CorruptEventError, match=r"run 't1' seq 2.*'m'.*loops back to version '1'"
        ):
            await saver.aget_tuple(cfg("t1"))
