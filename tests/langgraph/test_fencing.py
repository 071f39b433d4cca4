"""One writer per thread: a saver never appends on top of what it did not serve.

Two saver objects on one log stand in for two processes (each has its own
cache and writer epoch, as a process does).
"""

from __future__ import annotations

from typing import Any

import pytest

from agentlog.errors import ThreadConflictError
from agentlog.langgraph import AgentlogSaver
from tests.langgraph.test_bad_input import config, put


def next_checkpoint(saver: AgentlogSaver, thread_id: str, parent: str, **values: Any) -> str:
    return put(saver, thread_id, parent=parent, **values)


def ids(saver: AgentlogSaver, thread_id: str) -> list[tuple[str, str | None]]:
    """(checkpoint id, parent id) of each checkpoint, newest first."""
    return [
        (
            t.config["configurable"]["checkpoint_id"],
            t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None,
        )
        for t in saver.list(config(thread_id))
    ]


def test_a_stale_loop_is_refused_for_its_writes_and_its_checkpoint(log_url: str) -> None:
    with AgentlogSaver.from_url(log_url) as first, AgentlogSaver.from_url(log_url) as second:
        head = put(first, "t1", a=1)
        # Both load the same checkpoint, as two invokes answering one interrupt.
        assert first.get_tuple(config("t1")) is not None
        assert second.get_tuple(config("t1")) is not None
        second.put_writes(config("t1", head), [("a", 2)], "task-b")
        won = next_checkpoint(second, "t1", head, a=2)
        # The first one's writes build on what it read, which is no longer the head.
        with pytest.raises(ThreadConflictError, match="another process"):
            first.put_writes(config("t1", head), [("a", 3)], "task-a")
        # LangGraph goes on after a failed put_writes: its checkpoint is refused too.
        with pytest.raises(ThreadConflictError):
            next_checkpoint(first, "t1", head, a=3)
        assert ids(second, "t1") == [(won, head), (head, None)]
        latest = second.get_tuple(config("t1"))
        assert latest is not None and latest.pending_writes == []
        # The winner is not fenced by the loser's attempts: it goes on.
        third = next_checkpoint(second, "t1", won, a=4)
        assert ids(second, "t1")[0] == (third, won)
        # The loser reads the thread again (a new invoke) and may write again.
        latest = first.get_tuple(config("t1"))
        assert latest is not None and latest.checkpoint["channel_values"] == {"a": 4}
        fourth = next_checkpoint(first, "t1", third, a=5)
        assert ids(first, "t1")[0] == (fourth, third)


def test_a_read_of_another_namespace_does_not_make_a_stale_one_current(log_url: str) -> None:
    with AgentlogSaver.from_url(log_url) as creator:
        head = put(creator, "t1", a=1)
    with AgentlogSaver.from_url(log_url) as first, AgentlogSaver.from_url(log_url) as second:
        assert first.get_tuple(config("t1")) is not None
        assert second.get_tuple(config("t1")) is not None
        won = next_checkpoint(second, "t1", head, a=2)
        # A subgraph of the first process reads its own namespace, seeing the new head...
        sub = {"configurable": {"thread_id": "t1", "checkpoint_ns": "sub:1"}}
        assert first.get_tuple(sub) is None
        # ...but the parent namespace was served before it: still refused.
        with pytest.raises(ThreadConflictError, match="since this saver last read it"):
            next_checkpoint(first, "t1", head, a=3)
        assert ids(second, "t1") == [(won, head), (head, None)]


def test_the_first_writer_of_a_race_is_not_fenced_by_the_loser(log_url: str) -> None:
    with AgentlogSaver.from_url(log_url) as first, AgentlogSaver.from_url(log_url) as second:
        head = put(first, "t1", a=1)
        with AgentlogSaver.from_url(log_url) as a, AgentlogSaver.from_url(log_url) as b:
            assert a.get_tuple(config("t1")) is not None
            assert b.get_tuple(config("t1")) is not None
            won = next_checkpoint(a, "t1", head, a=2)
            with pytest.raises(ThreadConflictError):
                next_checkpoint(b, "t1", head, a=3)
            a.put_writes(config("t1", won), [("a", 9)], "task-a")
            after = next_checkpoint(a, "t1", won, a=9)
            assert [i for i, _ in ids(second, "t1")] == [after, won, head]
