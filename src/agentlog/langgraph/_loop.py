"""A private event loop on its own thread, which the saver's EventLog lives on.

agentlog's EventLog backends are coroutines bound to the loop that opened
them, while LangGraph calls a checkpointer from plain threads (``invoke``)
and from any loop (``ainvoke``). So the saver owns one loop on one daemon
thread and runs every storage call there: sync methods block on the result,
async ones await it through :func:`asyncio.wrap_future`. Until a call needs
the thread, a SQLite saver's opening and first reads run the loop on the
caller's thread instead (:meth:`LoopThread.run`, ``here``). The saver's state
is touched on that thread, but for a sync ``get_tuple`` served from its
cache, and a sync put or put_writes committed, on the caller's thread
(:meth:`~agentlog.langgraph._store.ThreadStore.serve_here`, ``append_here``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from agentlog.errors import ConfigError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog.sqlite import SqliteEventLog

__all__ = ["LoopThread", "close_unused", "runs_here"]

_T = TypeVar("_T")

_CLOSED = "the saver is closed; open a new one with AgentlogSaver.from_url"
#: Rounds of cancelling what a stopped loop left (bounded: stop() joins the thread).
_CANCEL_ROUNDS = 3


class LoopThread:
    """An asyncio loop running forever on a daemon thread until :meth:`stop`.

    The thread starts at the first call that needs it. Before that, a call
    made with ``here=True`` runs the loop on the calling thread instead (one
    such call at a time, and never inside another running loop): a saver
    opened to read a thread's latest checkpoint then starts no thread at all
    (issue 23 item 8). Once started, every call runs on the thread.
    """

    def __init__(self, name: str = "agentlog-langgraph") -> None:
        #: Made at the first call that runs a coroutine (a saver that only
        #: reads a SQLite thread cold never makes one).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._name = name
        #: Made at :meth:`_start` (an unstarted Thread would only be garbage in a cycle).
        self._thread: threading.Thread | None = None
        #: Held while a caller's thread runs the loop, and to start the thread.
        self._gate = threading.Lock()
        self._running_here: int | None = None  # the ident of the thread running it here
        self._made = threading.Lock()  # makes the loop once
        self.started = False
        #: Held to hand a call over and to close, so that every call handed
        #: over is queued before the stop (see _cancel_left).
        self._hand_over = threading.Lock()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop, made now if not yet (a closed LoopThread's is closed)."""
        if self._loop is None:
            with self._made:
                if self._loop is None:
                    self._loop = asyncio.new_event_loop()
                    if self._closed:
                        self._loop.close()
        return self._loop

    @property
    def closed(self) -> bool:
        """True once :meth:`stop` ran."""
        return self._closed

    @property
    def made(self) -> bool:
        """True once a call made the event loop."""
        return self._loop is not None

    @property
    def outside(self) -> bool:
        """True if the loop is open and the calling thread neither is its
        thread nor runs it here: a call from it may block on the loop, or do
        the loop's work itself."""
        return not (
            self._closed
            or threading.current_thread() is self._thread
            or self._running_here == threading.get_ident()
        )

    def _run(self) -> None:
        loop = self.loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:  # stop() ran: no call is handed over from now on
            loop.run_until_complete(_cancel_left())

    def _check_caller(self, coro: Coroutine[Any, Any, Any]) -> None:
        if threading.current_thread() is self._thread or (
            self._running_here == threading.get_ident()
        ):
            coro.close()
            raise ConfigError("the saver's own loop thread cannot wait on itself")
        if self._closed:
            coro.close()
            raise ConfigError(_CLOSED)

    def _start(self) -> None:
        with self._gate:  # waits for a call running here to finish
            if not self.started and not self._closed:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
                self.started = True

    def _run_here(self, coro: Coroutine[Any, Any, _T]) -> tuple[bool, _T | None]:
        """``(True, result)`` if ``coro`` ran here, on the calling thread; else
        ``(False, None)``, ``coro`` untouched (the thread runs, or will)."""
        if self.started or not self._gate.acquire(blocking=False):
            return False, None
        try:
            if self.started or self._closed or _loop_running():
                return False, None
            self._running_here = threading.get_ident()
            try:
                return True, self.loop.run_until_complete(coro)
            finally:
                self._running_here = None
        finally:
            self._gate.release()

    def run(self, coro: Coroutine[Any, Any, _T], *, here: bool = False) -> _T:
        """Run ``coro`` on the loop and block until it is done; with ``here``,
        on the calling thread if the loop's thread has not started."""
        self._check_caller(coro)
        if here:
            ran, result = self._run_here(coro)
            if ran:
                return result  # type: ignore[return-value]
        self._start()
        future = self._submit(coro)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            if self._closed:  # stop() cancelled it
                raise self.closed_error() from None
            raise

    @staticmethod
    def closed_error(why: str = "closed while this call waited for its loop") -> ConfigError:
        """The closed saver's error for a call that the close overtook."""
        return ConfigError(f"{_CLOSED} ({why})")

    async def arun(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coro`` on the loop and await it from another loop."""
        self._check_caller(coro)
        self._start()
        future = self._submit(coro)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self._closed and future.cancelled() and not (task and task.cancelling()):
                raise self.closed_error() from None  # stop() cancelled it, not our caller
            raise

    def _submit(self, coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        """Hand ``coro`` to the thread's loop (before any stop: see :func:`_cancel_left`)."""
        with self._hand_over:
            if self._closed:  # stop() ran since the caller's check
                coro.close()
                raise ConfigError(_CLOSED)
            return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        """Stop the loop and join its thread (idempotent)."""
        with self._gate:
            if self._closed:
                return
            with self._hand_over:
                self._closed = True
            if self.started and self._thread is not None:
                self.loop.call_soon_threadsafe(self.loop.stop)
                self._thread.join()
            if self._loop is not None:
                self._loop.close()


async def _cancel_left() -> None:
    """Run on a stopped loop: cancel every task left and let it finish, as
    :func:`asyncio.run` does (a task left pending is reported as destroyed
    when collected, its coroutine as never awaited). What the stop left in
    the loop's queue runs first: every call is handed over before the stop
    is queued (:meth:`LoopThread._submit`), so each call's task takes its
    first step, and is cancelled at its next wait; a call already done
    delivers its result. A cancelled call's caller is told the saver closed
    (:meth:`LoopThread.run`)."""
    this = asyncio.current_task()
    for _ in range(_CANCEL_ROUNDS):  # a cancelled task's clean-up may start another
        left = asyncio.all_tasks() - {this}
        if not left:
            return
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)


def _loop_running() -> bool:
    """True if an event loop runs on the calling thread (it cannot run another)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def close_unused(log: EventLog, loop: LoopThread) -> bool:
    """Close ``log`` on the calling thread if the loop's thread never started
    and it is a SQLite log that never wrote (closing it then waits on
    nothing): a saver opened only to read makes no event loop. False, and
    nothing done, otherwise. Holds the loop's gate, so a call running on
    another thread's own loop (a cold read falling back) finishes first."""
    if not isinstance(log, SqliteEventLog):
        return False
    with loop._gate:
        return not loop.started and log.close_unused()


def runs_here(log: EventLog) -> bool:
    """True for a log whose calls need no loop running between them: SQLite
    (its reads run on the caller's thread, its worker thread settles its own
    futures) with no cipher (a key store may keep tasks on the loop)."""
    return isinstance(log, SqliteEventLog) and log.cipher is None
