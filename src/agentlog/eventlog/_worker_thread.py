"""A single worker thread for blocking calls, awaited from asyncio."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from agentlog._logging import get_logger

__all__ = ["Outcome", "WorkerThread", "settle"]

_T = TypeVar("_T")
_log = get_logger(__name__)

#: A future and what it gets: ``(future, result, error)``; ``error`` wins if set.
Outcome = tuple["asyncio.Future[Any]", Any, BaseException | None]
#: A queued call: the loop and future awaiting it (None for a posted call), and the call.
_Call = tuple["asyncio.AbstractEventLoop | None", "asyncio.Future[Any] | None", Callable[[], Any]]


def _resolve(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


def _resolve_all(outcomes: list[Outcome]) -> None:
    for future, result, error in outcomes:
        _resolve(future, result, error)


def settle(
    outcomes: Iterable[tuple[asyncio.AbstractEventLoop, Outcome]],
    *,
    here: asyncio.AbstractEventLoop | None = None,
) -> None:
    """From any thread: resolve futures of one or more event loops.

    Each loop is woken once for all of its futures, not once per future; the
    futures of ``here``, the loop running this call, are resolved at once.
    """
    by_loop: dict[asyncio.AbstractEventLoop, list[Outcome]] = {}
    for loop, outcome in outcomes:
        by_loop.setdefault(loop, []).append(outcome)
    for loop, batch in by_loop.items():
        if loop is here:
            _resolve_all(batch)
            continue
        try:
            loop.call_soon_threadsafe(_resolve_all, batch)
        except RuntimeError:  # the loop closed while the call ran
            errors = [repr(error) for _f, _r, error in batch if error is not None]
            _log.warning("worker_call_orphaned", calls=len(batch), errors=errors)


class WorkerThread:
    """One thread that runs blocking calls in submission order.

    The SQLite backend gives it the connection: the thread holds it while it
    runs a call, and the event loop's thread may hold it between calls
    (:meth:`hold_if_idle`, :meth:`release`), so one thread uses it at a time.

    A plain queue plus ``call_soon_threadsafe`` costs about a third less per
    call than ``run_in_executor``, which matters next to a 300 us fsync.
    """

    def __init__(
        self, name: str, stopped: Callable[[], BaseException] = lambda: RuntimeError("stopped")
    ) -> None:
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._name = name
        # Made and started by the first call, not here: a log opened only to
        # read never needs it, and a thread start is most of opening one (issue
        # 23 item 8); an unstarted Thread would only be garbage in a cycle.
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()
        self.started = False
        # Calls queued or running, and who holds what the thread owns (the
        # SQLite connection): the thread while it runs a call, or the event
        # loop's thread between :meth:`hold_if_idle` and :meth:`release`.
        self._pending = 0
        self._counting = threading.Lock()
        # Set by stop(), under _counting: a call submitted after it raises
        # ``stopped()`` rather than waiting for a thread that will not run it.
        self._stopped = False
        self._stopped_error = stopped
        self._owner = threading.Lock()

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            loop, future, fn = call
            with self._owner:
                try:
                    result, error = fn(), None
                except BaseException as exc:  # handed to the awaiting task
                    result, error = None, exc
            with self._counting:
                self._pending -= 1
            if loop is None or future is None:
                if error is not None:  # a posted call settles its own waiters
                    _log.error("worker_post_failed", error=repr(error))
                elif isinstance(result, list):  # settled once the thread is idle: see post()
                    settle(result)
                continue
            settle([(loop, (future, result, error))])

    async def run(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn`` on the thread; return its result or raise its error.

        Raises:
            What ``stopped`` makes: :meth:`stop` was called first.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_T] = loop.create_future()
        self._put((loop, future, fn))
        if not self.started:
            self._start()
        return await future

    def post(self, fn: Callable[[], object]) -> None:
        """Queue ``fn`` to run on the thread, with nothing awaiting it.

        ``fn`` may report to its waiters by returning a list of their
        outcomes (``(loop, (future, result, error))``), which the thread
        settles (:func:`settle`) once it has counted ``fn`` done, so that a
        waiter that resumes finds the thread idle; anything else it returns is
        dropped. It must not raise (what it raises is only logged).

        Raises:
            What ``stopped`` makes: :meth:`stop` was called first (a caller
            that posts must know it cannot have been).
        """
        self._put((None, None, fn))
        if not self.started:
            self._start()

    def _put(self, call: _Call) -> None:
        """Queue ``call`` ahead of :meth:`stop`'s end mark, or raise if it was queued."""
        with self._counting:
            if self._stopped:
                raise self._stopped_error()
            self._pending += 1
            self._calls.put(call)

    @property
    def busy(self) -> bool:
        """Whether a call is queued or running (a hint: it may change at once)."""
        return self._pending > 0

    def hold_if_idle(self) -> bool:
        """Take what the thread owns for the calling thread, if no call is queued or running.

        True: the caller may use it (the SQLite connection) until it calls
        :meth:`release`; a call queued meanwhile waits until then. False: a
        call is queued or running, which the caller must not overtake, or
        another thread (another event loop's) holds it: the caller queues
        its own work on the thread instead. Never waits: a holder may
        :meth:`post` before it releases, which needs ``_counting``.
        """
        with self._counting:
            return not self._pending and self._owner.acquire(blocking=False)

    def release(self) -> None:
        """End the hold that :meth:`hold_if_idle` took."""
        self._owner.release()

    def _start(self) -> None:
        with self._starting:
            if not self.started:
                self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
                self._thread.start()
                self.started = True

    def stop(self) -> None:
        """Finish the queued calls, then end the thread (if it ever started).
        A call submitted after this raises (see :meth:`run`): none is left
        queued behind the end mark, waiting for ever."""
        with self._counting:
            self._stopped = True
            self._calls.put(None)
            queued = self._pending
        if queued:  # a call queued just before, by a caller yet to start the thread
            self._start()
        with self._starting:
            started, self.started = self.started, True  # no call starts it after this
        if started and self._thread is not None:
            self._thread.join()
