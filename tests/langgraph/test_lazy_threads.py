"""Opening a SQLite saver and reading a thread start no thread (issue 23 item 8).

A fresh saver's ``from_url`` and its first ``get_tuple`` run the saver's loop
on the calling thread, and a SQLite log starts its worker thread at its first
write: a process that opens a thread to read its latest checkpoint pays for
no thread start (two of them were most of opening a thread). Anything else
(a write, an async call, a call while another thread runs the loop) starts
the saver's loop thread, after which everything runs there, as before.

Counted, not timed: the threads alive before and after.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agentlog.errors import ConfigError
from agentlog.eventlog import RunStarted, TaskCompleted, open_log
from agentlog.eventlog.events import Event
from agentlog.langgraph import AgentlogSaver
from agentlog.langgraph._loop import LoopThread
from tests.eventlog.sqlite.test_lazy_writer import held
from tests.langgraph.test_bad_input import config, put


def _ours() -> set[str]:
    """The agentlog threads alive now (the saver's loop, the SQLite worker)."""
    return {
        t.name
        for t in threading.enumerate()
        if t.name.startswith(("agentlog-langgraph", "agentlog-sqlite"))
    }


def test_opening_a_thread_to_read_it_starts_no_thread(log_url: str) -> None:
    with AgentlogSaver.from_url(log_url) as writer:
        head = put(writer, "t1", a=1)
    before = _ours()
    with AgentlogSaver.from_url(log_url) as reader:
        found = reader.get_tuple(config("t1"))
        again = reader.get_tuple(config("t1"))
        assert reader.get_tuple(config("nobody")) is None
        assert _ours() == before
    assert found is not None and again is not None
    assert found.config["configurable"]["checkpoint_id"] == head
    assert found.checkpoint["channel_values"] == {"a": 1}


def test_a_write_after_a_read_on_the_callers_thread_starts_the_loop(log_url: str) -> None:
    with AgentlogSaver.from_url(log_url) as saver:
        head = put(saver, "t1", a=1)
    with AgentlogSaver.from_url(log_url) as saver:
        assert saver.get_tuple(config("t1")) is not None
        newer = put(saver, "t1", parent=head, a=2)
        assert any(name.startswith("agentlog-langgraph") for name in _ours())
        found = saver.get_tuple(config("t1"))
        assert found is not None and found.config["configurable"]["checkpoint_id"] == newer
        assert [t.config["configurable"]["checkpoint_id"] for t in saver.list(config("t1"))] == [
            newer,
            head,
        ]


def test_cold_reads_from_many_threads_at_once_all_succeed(log_url: str) -> None:
    with AgentlogSaver.from_url(log_url) as writer:
        heads = {f"t{i}": put(writer, f"t{i}", a=i) for i in range(6)}
    with AgentlogSaver.from_url(log_url) as reader, ThreadPoolExecutor(6) as pool:
        barrier = threading.Barrier(6)

        def read(thread_id: str) -> str:
            barrier.wait(timeout=60)
            found = reader.get_tuple(config(thread_id))
            assert found is not None
            return str(found.config["configurable"]["checkpoint_id"])

        assert dict(zip(heads, pool.map(read, heads), strict=True)) == heads


def test_a_saver_opened_inside_a_running_loop_works(log_url: str) -> None:
    async def main() -> None:
        with AgentlogSaver.from_url(log_url) as saver:  # sync, from a coroutine
            head = put(saver, "t1", a=1)
            found = await saver.aget_tuple(config("t1"))
            assert found is not None and found.config["configurable"]["checkpoint_id"] == head

    asyncio.run(main())


def test_a_closed_saver_that_never_started_its_loop_refuses_calls(log_url: str) -> None:
    saver = AgentlogSaver.from_url(log_url)
    assert saver.get_tuple(config("t1")) is None
    saver.close()
    saver.close()
    with pytest.raises(ConfigError, match="closed"):
        saver.get_tuple(config("t1"))


async def test_a_sqlite_log_starts_its_worker_thread_at_its_first_call_that_needs_it(
    tmp_path: Path,
) -> None:
    before = _ours()
    log = await open_log(f"sqlite:///{tmp_path / 'log.db'}")
    try:
        assert _ours() == before
        assert await log.find_run("r") is None
        assert _ours() == before
        await log.append([Event("r", 1, RunStarted("w", "1", {}, "async", "fp", start=["s"]))])
        await log.append([Event("r", 2, TaskCompleted("k", 1))])
        assert _ours() == before  # appends commit on the event loop's thread
        await log.claim_writer("r")
        assert len(_ours() - before) == 1
        assert [e.seq async for e in log.read("r")] == [1, 2]
    finally:
        await log.close()
    assert _ours() == before
    again = await open_log(f"sqlite:///{tmp_path / 'log.db'}")
    try:
        assert [e.seq async for e in again.read("r")] == [1, 2]
        assert _ours() == before
    finally:
        await again.close()


def test_a_call_from_inside_a_call_run_here_is_refused_not_deadlocked() -> None:
    loop = LoopThread()

    async def inner() -> int:
        return 1

    async def outer() -> int:
        for here in (True, False):
            with pytest.raises(ConfigError, match="cannot wait on itself"):
                loop.run(inner(), here=here)
        return 2

    try:
        assert loop.run(outer(), here=True) == 2
        assert not loop.started
        assert loop.run(inner()) == 1  # a call without here starts the thread
        assert loop.started
        assert loop.run(inner(), here=True) == 1  # and runs there from then on
    finally:
        loop.stop()
        loop.stop()


def test_savers_with_the_default_serializer_share_one(log_url: str) -> None:
    """Building the default serializer normalizes its whole allow-list: once per process."""
    with AgentlogSaver.from_url(log_url) as one, AgentlogSaver.from_url(log_url) as two:
        assert one.serde is two.serde
    with AgentlogSaver.from_url(log_url, allowed=[("my.module", "Thing")]) as own:
        assert own.serde is not one.serde
        assert ("my.module", "Thing") in own.serde.allowed  # type: ignore[attr-defined]


def test_opening_a_thread_to_read_it_opens_one_connection(log_url: str, tmp_path: Path) -> None:
    """As SqliteSaver does; the writing connection opens at the first write."""
    with AgentlogSaver.from_url(log_url) as writer:
        head = put(writer, "t1", a=1)
    path = tmp_path / "agentlog.db"
    with AgentlogSaver.from_url(log_url) as reader:
        assert held(path) == 1
        assert reader.get_tuple(config("t1")) is not None
        assert held(path) == 1
        put(reader, "t1", parent=head, a=2)
        # the writer's, and a read connection of the saver's loop thread, now started
        assert held(path) == 3
    assert held(path) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agentlog.db"]


def test_a_saver_opened_to_read_leaves_no_thread_object_in_a_cycle(log_url: str) -> None:
    """An unstarted Thread whose target is its owner's method is cyclic garbage
    the collector must find: the threads are made when they start."""
    with AgentlogSaver.from_url(log_url) as writer:
        put(writer, "t1", a=1)
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        _read_once(log_url)
        gc.collect()
        threads = [o for o in gc.garbage if isinstance(o, threading.Thread)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert threads == []


def _read_once(log_url: str) -> None:
    with AgentlogSaver.from_url(log_url) as reader:
        assert reader.get_tuple(config("t1")) is not None
