"""A SQLite saver's cold ``get_tuple`` runs with no event loop, in one statement
(issue 23 item 8).

``from_url`` opens a SQLite log synchronously, and the first ``get_tuple``
of a thread reads its newest snapshot, the snapshot's chain and the events
after it in one statement on the calling thread (``cold_read``), so opening
a thread to read it makes no asyncio loop and starts no thread, as
SqliteSaver. Anything else (a write, ``list``, a thread with no run) still
runs on the saver's loop, as before.

Counted, not timed: event loops alive in the process (the collector's
objects), and the statements the read connection runs (``set_trace_callback``).
"""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import threading
from typing import Any

from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.langgraph import AgentlogSaver
from tests.langgraph.test_bad_input import config, put
from tests.langgraph.test_snapshots import cfg, grow


def _loops() -> set[int]:
    """The ids of the asyncio event loops alive in this process."""
    return {id(o) for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop)}


def _traced(saver: AgentlogSaver) -> list[str]:
    """The statements the saver's log runs on this thread's read connection from now."""
    log = saver._log
    assert isinstance(log, SqliteEventLog)
    statements: list[str] = []
    conn: sqlite3.Connection = log._reads._local.conn
    conn.set_trace_callback(statements.append)
    return statements


def _same(a: Any, b: Any) -> None:
    assert a is not None and b is not None
    assert a.config == b.config and a.parent_config == b.parent_config
    assert a.checkpoint == b.checkpoint and a.metadata == b.metadata
    assert a.pending_writes == b.pending_writes


def test_a_cold_get_tuple_makes_no_event_loop(log_url: str) -> None:
    with AgentlogSaver.from_url(log_url) as writer:
        head = put(writer, "t1", a=1)
    gc.collect()
    before = _loops()
    with AgentlogSaver.from_url(log_url) as reader:
        found = reader.get_tuple(config("t1"))
        assert _loops() - before == set()
    assert _loops() - before == set()  # nor did closing it
    assert found is not None and found.config["configurable"]["checkpoint_id"] == head
    assert found.checkpoint["channel_values"] == {"a": 1}


def test_a_cold_get_tuple_is_one_statement(log_url: str) -> None:
    with AgentlogSaver.from_url(log_url, snapshot_every=20) as writer:
        grow(writer, "t", 130, messages=True)  # snapshots (a chain of deltas) and a tail
        written = writer.get_tuple(cfg("t"))
    with AgentlogSaver.from_url(log_url, snapshot_every=20) as reader:
        statements = _traced(reader)
        found = reader.get_tuple(cfg("t"))
        assert len(statements) == 1, statements
        _same(found, written)
        listed = next(iter(reader.list(cfg("t"), limit=1)))  # on the loop, from the events
        _same(found, listed)


def test_a_tail_longer_than_a_batch_is_read_on_the_loop(log_url: str) -> None:
    with AgentlogSaver.from_url(log_url, snapshot_every=10_000) as writer:
        grow(writer, "t", 30, messages=False)
        written = writer.get_tuple(cfg("t"))
    with AgentlogSaver.from_url(log_url) as reader:
        log = reader._log
        assert isinstance(log, SqliteEventLog)
        log.read_batch = 8  # 31 events, no snapshot: more than one batch
        _same(reader.get_tuple(cfg("t")), written)
        assert reader._loop.made


async def test_an_async_close_of_a_saver_that_only_read_makes_no_loop(log_url: str) -> None:
    with AgentlogSaver.from_url(log_url) as writer:
        put(writer, "t1", a=1)
    reader = AgentlogSaver.from_url(log_url)
    assert reader.get_tuple(config("t1")) is not None
    await reader.aclose()
    assert not reader._loop.made and not reader._loop.started


def test_close_waits_for_a_call_running_on_another_thread(log_url: str) -> None:
    """``close`` of a saver whose loop never started closes its log on the
    calling thread; a call in flight on another thread (holding the loop's
    gate, as a cold read falling back to a loop on its own thread does)
    finishes first, as it did when close went through the loop."""
    with AgentlogSaver.from_url(log_url) as writer:
        put(writer, "t1", a=1)
    saver = AgentlogSaver.from_url(log_url)
    log = saver._log
    assert isinstance(log, SqliteEventLog)
    gate = saver._loop._gate
    gate.acquire()  # another thread's call, in flight
    closer = threading.Thread(target=saver.close)
    try:
        closer.start()
        closer.join(timeout=0.5)
        assert closer.is_alive() and not log._closed, "closed under a call in flight"
    finally:
        gate.release()
    closer.join(timeout=60)
    assert not closer.is_alive() and log._closed
