"""A call handed to the saver's loop thread as another thread stops it.

The stop's ``loop.stop`` can land in the same loop iteration as the call's
callback: the loop stops before the call's task takes its first step, and
the caller's ``.result()`` used to wait forever (a review of session 33).
Then :meth:`LoopThread.stop` failed such calls, but left their tasks
pending on the closed loop: each was reported as destroyed, its coroutine
as never awaited, in whatever later test collected it (CI of session 33).

Now the stopped loop's thread runs what the stop left and cancels every
task left, as :func:`asyncio.run` does: a call under way is cancelled at
its wait (its caller gets the closed saver's ConfigError), and a call
whose task was made as the loop stopped runs and delivers its result. The
second order is forced by holding the call's hand-over callback (what
``run_coroutine_threadsafe`` queues) and running it just before the stop.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from agentlog.errors import ConfigError
from agentlog.langgraph._loop import LoopThread

_BOUND = 60.0


async def _one() -> int:
    return 1


def _stop_with_a_call(
    order: Callable[[asyncio.AbstractEventLoop, Callable[[], Any]], None],
) -> tuple[dict[str, object], Any, list[dict[str, Any]]]:
    """Hand a call to a started LoopThread and stop it; ``order(loop,
    hand_over)`` runs on the loop in place of its stop, ``hand_over`` being
    the call's callback. The caller's outcome, its coroutine and what the
    loop reported (after a collection) are returned."""
    loop_thread = LoopThread()
    assert loop_thread.run(_one()) == 1  # the thread runs
    loop = loop_thread.loop
    original = loop.call_soon_threadsafe
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    held: list[Callable[[], Any]] = []
    call_held = threading.Event()

    def recording(callback: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == "caller":
            held.append(callback)  # the call's hand-over: queued with the stop
            call_held.set()
            return None
        if callback == loop.stop:
            return original(order, loop, held[0])
        return original(callback, *args, **kwargs)

    loop.call_soon_threadsafe = recording  # type: ignore[method-assign]
    call = _one()
    return _call_then_stop(loop_thread, call, call_held), call, reported


def _call_then_stop(
    loop_thread: LoopThread, call: Coroutine[Any, Any, int], ready: threading.Event
) -> dict[str, object]:
    """Run ``call`` on ``loop_thread`` from a thread named "caller"; once
    ``ready`` is set, stop the loop. The caller's result or ConfigError,
    after a collection (a task left pending is reported then)."""
    outcome: dict[str, object] = {}

    def caller() -> None:
        try:
            outcome["result"] = loop_thread.run(call)
        except ConfigError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=caller, name="caller", daemon=True)
    thread.start()
    assert ready.wait(_BOUND)
    loop_thread.stop()
    thread.join(_BOUND)
    assert not thread.is_alive(), "the call still waits for a loop that stopped"
    del thread
    gc.collect()
    return outcome


def test_a_call_under_way_when_the_loop_stops_is_cancelled_and_told_so() -> None:
    loop_thread = LoopThread()
    assert loop_thread.run(_one()) == 1  # the thread runs
    reported: list[dict[str, Any]] = []
    loop_thread.loop.set_exception_handler(lambda _loop, context: reported.append(context))
    started = threading.Event()

    async def waits() -> int:
        started.set()
        await asyncio.Event().wait()  # never set: under way until cancelled
        return 2

    call = waits()
    outcome = _call_then_stop(loop_thread, call, started)
    assert "closed" in str(outcome.get("error")), outcome
    assert inspect.getcoroutinestate(call) == inspect.CORO_CLOSED, "the call was left pending"
    assert not reported, f"the stop left a task pending: {reported}"


def test_a_call_whose_task_was_made_as_the_loop_stopped_runs() -> None:
    def hand_over_then_stop(loop: asyncio.AbstractEventLoop, hand_over: Callable[[], Any]) -> None:
        hand_over()  # the task is made; its first step is left for after the stop
        loop.stop()

    outcome, call, reported = _stop_with_a_call(hand_over_then_stop)
    assert outcome == {"result": 1}, outcome
    assert inspect.getcoroutinestate(call) == inspect.CORO_CLOSED
    assert not reported, f"the stop left a task pending: {reported}"


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
