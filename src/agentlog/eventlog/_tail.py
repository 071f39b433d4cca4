"""How a tail waits for a run's next event: the hook of the one tail loop.

:meth:`EventReader.tail <agentlog.eventlog._reader.EventReader.tail>` is written
once: read what is there, stop after the run's terminal event, else wait and
read again. Only the waiting differs by backend, so a backend gives the loop
a :class:`TailWake` (its ``_tail_wake`` hook): this default polls; a log that
records through this process wakes its tails at once (:class:`Changes`);
PostgreSQL listens for a notification and Redis blocks in XREAD.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import cast

__all__ = ["Changes", "TailWake"]


class TailWake:
    """Waits for the next read of a tail; this default sleeps ``poll_seconds``.

    A tail takes :meth:`arm` before each read and passes it to :meth:`wait`,
    so a change recorded between the read and the wait still wakes it.
    """

    #: A run not started yet (UnknownRunError): wait for its first event
    #: (True), or raise at once (False, this default: a reader that cannot
    #: be woken would otherwise poll for a run that may never come).
    waits_for_start = False

    def __init__(self, poll_seconds: float) -> None:
        self.poll_seconds = poll_seconds

    def arm(self) -> object:
        """What :meth:`wait` needs to see a change made after this call."""
        return None

    async def wait(self, armed: object, after_seq: int) -> None:
        """Return when the run may have an event after ``after_seq``."""
        del armed, after_seq
        await asyncio.sleep(self.poll_seconds)

    async def close(self) -> None:
        """Release what waiting held (a connection); called once the tail ends."""


class Changes:
    """Wakes the tails of one log instance when it records something.

    Appends through the instance call :meth:`notify`; appends by other
    processes are seen at the tail's next poll (or never, for a store that
    lives in this process alone).
    """

    def __init__(self) -> None:
        #: One event for each loop with a tail armed: an asyncio.Event belongs to
        #: the loop that first waits on it. :meth:`notify` sets each on its loop.
        self._events: dict[asyncio.AbstractEventLoop, asyncio.Event] = {}
        self._lock = threading.Lock()

    def arm(self) -> asyncio.Event:
        """The event that the next :meth:`notify` sets, for a tail on the running loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            event = self._events.get(loop)
            if event is None:
                event = self._events[loop] = asyncio.Event()
            return event

    def notify(self) -> None:
        """Wake every tail armed before now; from any thread (an append that
        committed with no event loop, on the caller's thread, notifies too)."""
        with self._lock:
            events, self._events = self._events, {}
        if not events:
            return
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        for loop, event in events.items():
            if loop is here:
                event.set()
            else:
                with contextlib.suppress(RuntimeError):  # that loop closed: no tail waits
                    loop.call_soon_threadsafe(event.set)

    def wake(self, poll_seconds: float | None) -> TailWake:
        """A wake for one tail; ``poll_seconds`` None never polls (nothing
        outside this process can write the store)."""
        return _ChangeWake(self, poll_seconds)


class _ChangeWake(TailWake):
    waits_for_start = True

    def __init__(self, changes: Changes, poll_seconds: float | None) -> None:
        super().__init__(poll_seconds or 0.0)
        self._changes, self._poll = changes, poll_seconds

    def arm(self) -> asyncio.Event:
        return self._changes.arm()

    async def wait(self, armed: object, after_seq: int) -> None:
        changed = cast(asyncio.Event, armed)
        if self._poll is None:
            await changed.wait()
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), self._poll)
