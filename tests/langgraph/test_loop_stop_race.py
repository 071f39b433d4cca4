"""A call handed to the saver's loop thread as another thread stops it.

The stop's ``loop.stop`` can land in the same loop iteration as the call's
callback, after it: the loop stops before the call's task takes its first
step, and the caller's ``.result()`` used to wait forever (a review of
session 33). Now :meth:`LoopThread.stop` fails every call it left unrun with
the closed saver's ConfigError. The order is forced by recording the loop's
``call_soon_threadsafe``: a callback blocks the loop until both the call and
the stop are queued.
"""

from __future__ import annotations

import threading
from typing import Any

from agentlog.errors import ConfigError
from agentlog.langgraph._loop import LoopThread

_BOUND = 60.0


async def _one() -> int:
    return 1


def test_a_call_queued_with_the_stop_is_failed_not_left_waiting() -> None:
    loop_thread = LoopThread()
    assert loop_thread.run(_one()) == 1  # the thread runs
    loop = loop_thread.loop
    original = loop.call_soon_threadsafe
    call_queued, stop_queued = threading.Event(), threading.Event()

    def recording(callback: Any, *args: Any, **kwargs: Any) -> Any:
        handle = original(callback, *args, **kwargs)
        if callback == loop.stop:
            stop_queued.set()
        elif threading.current_thread().name == "caller":
            call_queued.set()
        return handle

    def hold_the_loop() -> None:
        call_queued.wait(_BOUND)
        stop_queued.wait(_BOUND)

    loop.call_soon_threadsafe = recording  # type: ignore[method-assign]
    original(hold_the_loop)
    outcome: dict[str, object] = {}

    def caller() -> None:
        try:
            outcome["result"] = loop_thread.run(_one())
        except ConfigError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=caller, name="caller", daemon=True)
    thread.start()
    assert call_queued.wait(_BOUND)
    loop_thread.stop()
    thread.join(_BOUND)
    assert not thread.is_alive(), "the call still waits for a loop that stopped"
    assert "closed" in str(outcome["error"]), outcome


def test_a_call_after_stop_is_refused() -> None:
    loop_thread = LoopThread()
    assert loop_thread.run(_one()) == 1
    loop_thread.stop()
    coro = _one()
    try:
        loop_thread.run(coro)
    except ConfigError as exc:
        assert "closed" in str(exc)
    else:
        raise AssertionError("a stopped loop ran a call")
