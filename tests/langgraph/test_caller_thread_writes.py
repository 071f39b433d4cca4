"""A sync ``put`` or ``put_writes`` of a thread the saver holds (and has
written) is appended and committed on the caller's thread, with no hop to the
saver's loop, when the SQLite log is idle; anything else goes through the loop.

Counted, not timed: the loop's ``run`` is wrapped with a tally of the calls
(:class:`Hops`). Every case reads back what was written, through a fresh
saver on the same file (the commit is what a reader sees).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from agentlog.errors import ThreadConflictError
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.langgraph import AgentlogSaver
from tests.langgraph.test_bad_input import config, put
from tests.langgraph.test_caller_thread_reads import Hops

BOUND = 60.0  # seconds any wait below may take before the test fails


def _log(saver: AgentlogSaver) -> SqliteEventLog:
    log = saver._log
    assert isinstance(log, SqliteEventLog)
    return log


def test_warm_puts_and_writes_make_no_hop_and_are_committed(log_url: str) -> None:
    with AgentlogSaver.from_url(log_url) as saver:
        head = put(saver, "t1", n=0)  # a new thread's first write: on the loop
        hops = Hops(saver)
        durable: list[bool | None] = []
        db = _log(saver)._db
        transact = db.transact

        def spy(body: Any, **how: Any) -> Any:
            durable.append(how.get("durable"))
            return transact(body, **how)

        db.transact = spy  # type: ignore[method-assign]
        for n in range(1, 6):
            saver.put_writes(config("t1", head), [("n", n)], f"task{n}")
            head = put(saver, "t1", parent=head, n=n)
        assert hops.count == 0
        assert _log(saver)._group.here_commits == 10
        assert durable == [True] * 10  # each committed with synchronous=FULL
    with AgentlogSaver.from_url(log_url) as reader:
        found = reader.get_tuple(config("t1"))
        assert found is not None
        assert found.checkpoint["channel_values"] == {"n": 5}
        assert found.config["configurable"]["checkpoint_id"] == head
        older = [t for t in reader.list(config("t1")) if t.pending_writes]
        assert sorted(w[2] for t in older for w in t.pending_writes) == [1, 2, 3, 4, 5]


def test_a_busy_log_sends_the_put_to_the_loop(log_url: str) -> None:
    with AgentlogSaver.from_url(log_url) as saver:
        head = put(saver, "t1", n=0)
        hops = Hops(saver)
        worker = _log(saver)._worker
        assert worker.hold_if_idle()  # as a commit on another thread would
        done: list[str] = []
        writer = threading.Thread(target=lambda: done.append(put(saver, "t1", parent=head, n=1)))
        try:
            writer.start()
            _wait_for(lambda: hops.count == 1)  # handed to the loop, which waits for the log
            assert not done
        finally:
            worker.release()
        writer.join(BOUND)
        assert done and hops.count == 1
        found = saver.get_tuple(config("t1"))
        assert found is not None and found.checkpoint["channel_values"] == {"n": 1}


def test_the_loop_waits_for_a_thread_held_on_a_callers_thread(log_url: str) -> None:
    with AgentlogSaver.from_url(log_url) as saver:
        head = put(saver, "t1", n=0)
        loop = saver._loop.loop
        with saver._store._locks.hold_here("t1"):
            pending = asyncio.run_coroutine_threadsafe(
                saver._put(*saver._put_event(config("t1", head), *_step(1))), loop
            )
            # A call queued after it has run: the loop got to the put and waits.
            asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result(BOUND)
            assert not pending.done()
            assert "t1" in saver._store._busy
        pending.result(BOUND)
        found = saver.get_tuple(config("t1"))
        assert found is not None and found.checkpoint["channel_values"] == {"n": 1}


def test_puts_and_writes_from_many_threads_beside_the_loop_keep_the_thread_whole(
    log_url: str,
) -> None:
    with AgentlogSaver.from_url(log_url) as saver:
        heads = {t: put(saver, t, n=0) for t in ("t1", "t2")}
        errors: list[BaseException] = []
        written: dict[str, list[int]] = {"t1": [], "t2": []}

        def writes(thread_id: str, task: int) -> None:
            try:
                for n in range(20):
                    saver.put_writes(
                        config(thread_id, heads[thread_id]), [("w", task * 100 + n)], f"k{task}-{n}"
                    )
            except BaseException as exc:  # reported below, from the test's thread
                errors.append(exc)

        def puts(thread_id: str) -> None:
            try:
                head = heads[thread_id]
                for n in range(1, 21):
                    head = put(saver, thread_id, parent=head, n=n)
                    written[thread_id].append(n)
            except BaseException as exc:
                errors.append(exc)

        async def reads() -> None:
            for _ in range(20):
                for thread_id in ("t1", "t2"):
                    assert await saver.aget_tuple(config(thread_id)) is not None

        threads = [threading.Thread(target=writes, args=(t, k)) for t in heads for k in (1, 2)]
        threads += [threading.Thread(target=puts, args=(t,)) for t in heads]
        for thread in threads:
            thread.start()
        asyncio.run(reads())
        for thread in threads:
            thread.join(BOUND)
        assert errors == []
        assert written == {"t1": list(range(1, 21)), "t2": list(range(1, 21))}
    with AgentlogSaver.from_url(log_url) as reader:
        for thread_id, first in heads.items():
            latest = reader.get_tuple(config(thread_id))
            assert latest is not None and latest.checkpoint["channel_values"] == {"n": 20}
            at_first = reader.get_tuple(config(thread_id, first))
            assert at_first is not None
            stored = sorted(w[2] for w in at_first.pending_writes)
            assert stored == sorted(k * 100 + n for k in (1, 2) for n in range(20))


def test_a_put_here_after_another_writer_is_refused_and_writes_nothing(log_url: str) -> None:
    with (
        AgentlogSaver.from_url(log_url) as first,
        AgentlogSaver.from_url(log_url) as second,
    ):
        head = put(first, "t1", n=0)
        put(first, "t1", parent=head, n=1)  # first has written: its puts go here
        assert second.get_tuple(config("t1")) is not None
        newer = put(second, "t1", parent=head, n=2)
        hops = Hops(first)
        with pytest.raises(ThreadConflictError, match="another process"):
            first.put_writes(config("t1", head), [("n", 9)], "late")
        assert hops.count == 0  # refused by the log's conditional append, here
        assert _log(first)._group.here_commits == 1
        found = second.get_tuple(config("t1"))
        assert found is not None
        assert found.config["configurable"]["checkpoint_id"] == newer


def _step(n: int) -> tuple[Any, Any, Any]:
    from tests.langgraph.test_bad_input import checkpoint

    saved = checkpoint(n=n)
    return saved, {"source": "loop", "step": n}, dict(saved["channel_versions"])


def _wait_for(done: Any) -> None:
    finished = threading.Event()
    for _ in range(int(BOUND * 100)):
        if done():
            return
        finished.wait(0.01)
    raise AssertionError("condition not met in time")


def test_editing_what_was_put_changes_nothing_the_saver_holds(saver: AgentlogSaver) -> None:
    from tests.langgraph.test_bad_input import checkpoint

    head = put(saver, "t1", msgs=[{"text": "a"}])
    saved = checkpoint(msgs=[{"text": "a"}, {"text": "b"}])
    saved["channel_versions"] = {"msgs": f"{2:032}.0"}
    saver.put(config("t1", head), saved, {"step": 1}, {"msgs": f"{2:032}.0"})
    saved["channel_values"]["msgs"][1]["text"] = "edited"  # LangGraph's objects, edited after
    saved["channel_versions"]["msgs"] = "edited"
    found = saver.get_tuple(config("t1"))
    assert found is not None
    assert found.checkpoint["channel_values"]["msgs"] == [{"text": "a"}, {"text": "b"}]
    assert found.checkpoint["channel_versions"] == {"msgs": f"{2:032}.0"}
