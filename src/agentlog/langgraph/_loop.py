"""A private event loop on its own thread, which the saver's EventLog lives on.

agentlog's EventLog backends are coroutines bound to the loop that opened
them, while LangGraph calls a checkpointer from plain threads (``invoke``)
and from any loop (``ainvoke``). So the saver owns one loop on one daemon
thread and runs every storage call there: sync methods block on the result,
async ones await it through :func:`asyncio.wrap_future`. The saver's state
is touched on that thread, but for a sync ``get_tuple`` served from its
cache on the caller's thread under the cache's guard
(:meth:`~agentlog.langgraph._store.ThreadStore.serve_here`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from agentlog.errors import ConfigError

__all__ = ["LoopThread"]

_T = TypeVar("_T")


class LoopThread:
    """An asyncio loop running forever on a daemon thread until :meth:`stop`."""

    def __init__(self, name: str = "agentlog-langgraph") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def _check_caller(self, coro: Coroutine[Any, Any, Any]) -> None:
        if threading.current_thread() is self._thread:
            coro.close()
            raise ConfigError("the saver's own loop thread cannot wait on itself")
        if self.loop.is_closed():
            coro.close()
            raise ConfigError("the saver is closed; open a new one with AgentlogSaver.from_url")

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coro`` on the loop and block until it is done."""
        self._check_caller(coro)
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def arun(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coro`` on the loop and await it from another loop."""
        self._check_caller(coro)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def stop(self) -> None:
        """Stop the loop and join its thread (idempotent)."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()
