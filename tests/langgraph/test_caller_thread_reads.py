"""A sync ``get_tuple`` of a thread the saver holds is served on the caller's
thread, with no hop to the saver's loop, when the log tells there that
nothing was appended since; anything else still goes through the loop.

Counted, not timed: the loop's ``run`` is wrapped with a tally of the calls.
Two saver objects on one log stand in for two processes.
"""

from __future__ import annotations

import threading
from collections.abc import Coroutine
from typing import Any

import pytest

from agentlog.errors import ConfigError, ThreadConflictError
from agentlog.langgraph import AgentlogSaver
from tests.langgraph.test_bad_input import config, put


class Hops:
    """Counts the coroutines a saver sends to its loop thread (sync calls)."""

    def __init__(self, saver: AgentlogSaver) -> None:
        self.count = 0
        self._run = saver._loop.run
        saver._loop.run = self  # type: ignore[method-assign]

    def __call__(self, coro: Coroutine[Any, Any, Any], **how: Any) -> Any:
        self.count += 1
        return self._run(coro, **how)


def test_a_warm_get_tuple_makes_no_hop_to_the_loop(saver: AgentlogSaver) -> None:
    head = put(saver, "t1", a=1)
    hops = Hops(saver)
    for _ in range(3):
        found = saver.get_tuple(config("t1"))
        assert found is not None
        assert found.config["configurable"]["checkpoint_id"] == head
        assert found.checkpoint["channel_values"] == {"a": 1}
    named = saver.get_tuple(config("t1", head))
    assert named is not None and named.checkpoint["channel_values"] == {"a": 1}
    assert hops.count == 0


def test_a_thread_not_yet_held_is_read_here_then_served_here(log_url: str) -> None:
    with AgentlogSaver.from_url(log_url) as writer:
        head = put(writer, "t1", a=1)
    with AgentlogSaver.from_url(log_url) as reader:
        hops = Hops(reader)
        first = reader.get_tuple(config("t1"))
        assert hops.count == 0  # the cold read, in one statement on this thread (SQLite)
        again = reader.get_tuple(config("t1"))
        assert hops.count == 0
        assert first is not None and again is not None
        assert again.config["configurable"]["checkpoint_id"] == head
        assert reader.get_tuple(config("nobody")) is None
        assert hops.count == 1  # a thread with no run: read on the loop


def test_another_writers_checkpoint_is_seen_and_served_before_a_put(log_url: str) -> None:
    with (
        AgentlogSaver.from_url(log_url) as first,
        AgentlogSaver.from_url(log_url) as second,
    ):
        head = put(first, "t1", a=1)
        assert first.get_tuple(config("t1")) is not None
        assert second.get_tuple(config("t1")) is not None
        newer = put(second, "t1", parent=head, a=2)
        hops = Hops(first)
        found = first.get_tuple(config("t1"))
        assert found is not None
        assert found.config["configurable"]["checkpoint_id"] == newer
        assert hops.count == 1  # a new event: caught up on the loop
        # The second's claim fenced it: its write is refused, nothing is written
        # (the log refuses the append made on this thread), and the thread
        # stays refused until it is read again (on the loop, which would claim).
        with pytest.raises(ThreadConflictError):
            put(first, "t1", parent=newer, a=3)
        assert hops.count == 1
        with pytest.raises(ThreadConflictError):
            put(first, "t1", parent=newer, a=3)
        again = first.get_tuple(config("t1"))  # served here: the refusal is lifted
        assert again is not None and hops.count == 2
        put(first, "t1", parent=newer, a=3)


def test_a_closed_saver_refuses_a_get_tuple(log_url: str) -> None:
    saver = AgentlogSaver.from_url(log_url)
    put(saver, "t1", a=1)
    saver.close()
    with pytest.raises(ConfigError, match="closed"):
        saver.get_tuple(config("t1"))


def test_reads_on_many_threads_beside_puts_see_only_whole_checkpoints(
    saver: AgentlogSaver,
) -> None:
    head = put(saver, "t1", n=0)
    saved = {head: 0}
    errors: list[BaseException] = []
    seen: list[tuple[str, Any]] = []
    done = threading.Event()

    def read() -> None:
        try:
            last = 0
            while not done.is_set():
                found = saver.get_tuple(config("t1"))
                assert found is not None
                values = found.checkpoint["channel_values"]
                assert values["n"] >= last  # never an older checkpoint than one seen
                last = values["n"]
                seen.append((found.config["configurable"]["checkpoint_id"], values))
        except BaseException as exc:  # reported below, from the test's thread
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(4)]
    for reader in readers:
        reader.start()
    try:
        for n in range(1, 60):
            saved[put(saver, "t1", parent=head, n=n)] = n
            head = max(saved)
    finally:
        done.set()
        for reader in readers:
            reader.join()
    assert errors == []
    assert seen and all(values == {"n": saved[cid]} for cid, values in seen)
