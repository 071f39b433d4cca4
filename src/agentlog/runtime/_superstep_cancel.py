"""How a cancel interrupts a run's running superstep without a task per superstep.

A superstep runs in its run's own task: a task for it, and another to wait
on the cancel, cost about a third of a step's CPU (docs/benchmarks.md).
:meth:`SuperstepCancel.interrupt` cancels that task while it runs a
superstep; the task's cancel count (``Task.uncancel``) tells that cancel
from one of the run's task itself (a close, a fenced writer), which goes on
up as before.

A cancel sent while the task is suspended inside the superstep is delivered
there, at the ``await`` it is suspended on (or at the one it resumes from),
never after the superstep: so none is left pending for the run's next
``await`` (a write of its events). A step cancelling its own run is not
interrupted (its task is the one running; a cancel it sent itself could be
left pending past the superstep): that cancel is recorded at the step
boundary after the superstep.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

__all__ = ["SuperstepCancel"]


class SuperstepCancel:
    """Runs a run's supersteps in the run's own task, interruptible by a cancel."""

    __slots__ = ("_sent", "_task")

    def __init__(self) -> None:
        #: the run's task while it runs a superstep
        self._task: asyncio.Task[Any] | None = None
        #: :meth:`interrupt` cancelled :attr:`_task`, not yet taken back
        self._sent = False

    def interrupt(self) -> bool:
        """Cancel the running superstep, if one runs (from another task);
        True if this call cancelled it."""
        task = self._task
        if task is None or self._sent or task is asyncio.current_task():
            return False
        self._sent = True
        task.cancel()
        return True

    async def run(self, superstep: Coroutine[Any, Any, list[str]]) -> list[str] | None:
        """The superstep's outcomes, or None if :meth:`interrupt` cancelled it.

        A superstep that finished although interrupted (its steps swallowed
        the cancel) keeps its outcomes.

        Raises:
            asyncio.CancelledError: the run's task itself was cancelled.
        """
        self._sent = False
        self._task = asyncio.current_task()
        try:
            outcomes = await superstep
        except asyncio.CancelledError:
            if not self._take_back():
                raise  # the run's own task is cancelled (close, fenced)
            return None
        finally:
            self._task = None
        self._take_back()
        return outcomes

    def _take_back(self) -> bool:
        """Undo :meth:`interrupt`'s cancel, if it sent one; True if it did
        and no other cancel of the task is pending."""
        if not self._sent:
            return False
        self._sent = False
        task = asyncio.current_task()
        return task is None or task.uncancel() == 0
