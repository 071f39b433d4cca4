"""A new LangGraph thread's first save on PostgreSQL is one statement, one commit.

The first save of a thread used to claim the run (a commit), read it again
and then append (a second commit): three to four round trips where
PostgresSaver makes one. A new thread has no writer to fence, so its first
batch goes in at epoch 0, conditional on seq 1, in one statement that
creates the run's row and its events. Counted, not timed: every statement
and transaction the process sends through psycopg during the ``put`` is
recorded (the real server runs them).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from agentlog.errors import ThreadConflictError
from agentlog.eventlog.postgres._schema import APPEND_NEW
from agentlog.langgraph import AgentlogSaver

#: An append's statements: the run's row and its events, in one.
WRITES = ("INSERT", "UPDATE", "WITH")
#: What the pool runs once on each connection it opens (in the background).
CONNECTION_SETUP = "SET synchronous_commit = on"


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement and explicit transaction psycopg is asked for, in order
    (but a new pooled connection's setup)."""
    seen: list[str] = []
    execute, transaction = psycopg.AsyncConnection.execute, psycopg.AsyncConnection.transaction

    async def counted_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if str(query) != CONNECTION_SETUP:
            seen.append(str(query))
        return await execute(self, query, *args, **kwargs)

    def counted_transaction(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append("BEGIN")
        return transaction(self, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", counted_execute)
    monkeypatch.setattr(psycopg.AsyncConnection, "transaction", counted_transaction)
    yield seen


def cfg(thread_id: str, checkpoint_id: str | None = None) -> Any:
    configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def put(saver: AgentlogSaver, thread_id: str, parent: str | None = None, text: str = "") -> str:
    saved = empty_checkpoint()
    saved["channel_values"] = {"messages": [text or "hello"]}
    saved["channel_versions"] = {"messages": f"{1:032}.0"}
    versions = dict(saved["channel_versions"])
    stored = saver.put(cfg(thread_id, parent), saved, {"source": "input", "step": -1}, versions)
    return str(stored["configurable"]["checkpoint_id"])


def test_the_first_save_of_a_new_thread_is_one_statement(
    postgres_url: str, sent: list[str]
) -> None:
    with AgentlogSaver.from_url(postgres_url) as saver:
        assert saver.get_tuple(cfg("t1")) is None  # as LangGraph's invoke starts
        sent.clear()
        first = put(saver, "t1")
        assert sent == [APPEND_NEW], "the first save is one statement (no claim, no re-read)"
        sent.clear()
        put(saver, "t1", parent=first, text="next")
        assert len(sent) == 1 and sent[0].startswith(WRITES)  # the run's fast append
        latest = saver.get_tuple(cfg("t1"))
    assert latest is not None and latest.checkpoint["channel_values"] == {"messages": ["next"]}


def test_two_savers_creating_one_thread_one_wins_nothing_forks(postgres_url: str) -> None:
    with AgentlogSaver.from_url(postgres_url) as one, AgentlogSaver.from_url(postgres_url) as two:
        assert one.get_tuple(cfg("t1")) is None and two.get_tuple(cfg("t1")) is None
        won = put(one, "t1", text="one")
        with pytest.raises(ThreadConflictError, match="thread 't1'"):
            put(two, "t1", text="two")
        ids = [t.config["configurable"]["checkpoint_id"] for t in two.list(cfg("t1"))]
        assert ids == [won]
        # The loser reads again and continues from the winner's checkpoint,
        # which fences the first saver (it claims a newer epoch).
        latest = two.get_tuple(cfg("t1"))
        assert latest is not None and latest.checkpoint["channel_values"] == {"messages": ["one"]}
        taken = put(two, "t1", parent=won, text="two")
        with pytest.raises(ThreadConflictError, match="thread 't1'"):
            put(one, "t1", parent=won, text="stale")
        ids = [t.config["configurable"]["checkpoint_id"] for t in one.list(cfg("t1"))]
        assert ids == [taken, won]
