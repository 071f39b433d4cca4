"""Who may work on a LangGraph thread's cached state: the saver's loop, or a caller's thread.

The saver's loop takes a thread's :class:`ThreadLock` (an asyncio lock) for
each operation. Two sync calls may instead work on the caller's own thread,
with no hop to the loop: a warm ``get_tuple``, which holds :attr:`ThreadLocks.guard`
while it reads, and a ``put`` or ``put_writes`` whose append the log can
commit there (:meth:`ThreadLocks.hold_here`), which marks the thread busy and
works without the guard, since it waits for a commit (an fsync). The guard
decides, so the two sides never work on one thread at once: the loop marks
a thread busy under it while it holds the thread's lock, a caller's thread
works on a thread only if it is not busy, and the loop waits (on a future,
never blocking its thread) for a caller's thread that holds the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from types import TracebackType

__all__ = ["ThreadLock", "ThreadLocks"]

#: A loop waiting for a caller's thread to let go of a thread, and its future.
_Waiter = tuple[asyncio.AbstractEventLoop, "asyncio.Future[None]"]


class ThreadLocks:
    """The locks of one saver's threads, on its loop and on callers' threads."""

    def __init__(self) -> None:
        self._locks: dict[str, ThreadLock] = {}
        #: Held by a read on a caller's thread, and to mark a thread busy or free.
        self.guard = threading.Lock()
        #: Notified under the guard whenever a thread stops being busy.
        self._freed = threading.Condition(self.guard)
        #: Threads that the loop or a caller's thread works on.
        self.busy: set[str] = set()
        #: Threads a caller's thread holds (:meth:`hold_here`), with the loops waiting for each.
        self._here: dict[str, list[_Waiter]] = {}

    def lock(self, thread_id: str) -> ThreadLock:
        """The thread's lock on the saver's loop (see :class:`ThreadLock`)."""
        found = self._locks.get(thread_id)
        if found is None:
            found = self._locks[thread_id] = ThreadLock(self, thread_id)
        return found

    @contextlib.contextmanager
    def hold_here(self, thread_id: str) -> Iterator[None]:
        """Hold the thread on the calling thread (not the loop's) while the block runs.

        Waits while the loop or another caller's thread works on it
        (LangGraph puts a step's writes and its next checkpoint from two
        threads at once). A loop that asks for the thread's lock meanwhile
        waits until the block ends.
        """
        with self.guard:
            while thread_id in self.busy:
                self._freed.wait()
            self.busy.add(thread_id)
            self._here[thread_id] = []
        try:
            yield
        finally:
            with self.guard:
                self.busy.discard(thread_id)
                waiters = self._here.pop(thread_id)
                self._freed.notify_all()
            for loop, future in waiters:
                with contextlib.suppress(RuntimeError):  # that loop closed
                    loop.call_soon_threadsafe(_wake, future)

    def _mark_busy(self, thread_id: str) -> asyncio.Future[None] | None:
        """On the loop, holding the thread's asyncio lock: mark it busy, or a
        future to wait on while a caller's thread holds it."""
        with self.guard:
            waiters = self._here.get(thread_id)
            if waiters is None:
                self.busy.add(thread_id)
                return None
            loop = asyncio.get_running_loop()
            future: asyncio.Future[None] = loop.create_future()
            waiters.append((loop, future))
            return future

    def _mark_free(self, thread_id: str) -> None:
        with self.guard:
            self.busy.discard(thread_id)
            self._freed.notify_all()


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class ThreadLock:
    """A thread's asyncio lock that marks the thread busy while the loop holds it.

    LangGraph calls put and put_writes from several threads at once, and one
    thread's reads and appends must not interleave. A caller's thread that
    holds the thread (:meth:`ThreadLocks.hold_here`) is waited for.
    """

    def __init__(self, locks: ThreadLocks, thread_id: str) -> None:
        self._lock = asyncio.Lock()
        self._locks, self._thread_id = locks, thread_id

    async def __aenter__(self) -> None:
        await self._lock.acquire()
        try:
            while (held_here := self._locks._mark_busy(self._thread_id)) is not None:
                await held_here
        except BaseException:  # cancelled while waiting: not marked busy
            self._lock.release()
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._locks._mark_free(self._thread_id)
        self._lock.release()
