"""Loops that must stop when cancelled, even when a library swallows the cancel.

A cancel that lands while a task waits inside a client library can come out
as that library's timeout or connection error instead of
:class:`asyncio.CancelledError` (``asyncio.timeout`` and ``async_timeout`` can
do this on Python 3.11). A loop that retries on errors would then go on for
ever, and whoever awaits it (a run's driver, ``Runtime.close``) would hang.
The runtime's background loops check :func:`task_cancelling` themselves.
"""

from __future__ import annotations

import asyncio

__all__ = ["task_cancelling"]


def task_cancelling() -> bool:
    """True once the current task was asked to cancel (even if that was swallowed)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
