"""A single worker thread for blocking calls, awaited from asyncio."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from agentlog._logging import get_logger

__all__ = ["WorkerThread"]

_T = TypeVar("_T")
_log = get_logger(__name__)


def _resolve(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


class WorkerThread:
    """One thread that runs blocking calls in submission order.

    The SQLite backend gives it the connection, so only this thread touches it.

    A plain queue plus ``call_soon_threadsafe`` costs about a third less per
    call than ``run_in_executor``, which matters next to a 300 us fsync.
    """

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[
            tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[[], Any]] | None
        ] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            loop, future, fn = call
            try:
                result, error = fn(), None
            except BaseException as exc:  # handed to the awaiting task
                result, error = None, exc
            try:
                loop.call_soon_threadsafe(_resolve, future, result, error)
            except RuntimeError:  # the loop closed while the call ran
                _log.warning("worker_call_orphaned", error=repr(error))

    async def run(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn`` on the thread; return its result or raise its error."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_T] = loop.create_future()
        self._calls.put((loop, future, fn))
        return await future

    def stop(self) -> None:
        """Finish the queued calls, then end the thread."""
        self._calls.put(None)
        self._thread.join()
