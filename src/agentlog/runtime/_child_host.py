"""The runtime's side of child runs: start them, read them, and tell the
parent when one ends (see :mod:`agentlog.runtime._children`).

When a run the driver drove ends, :meth:`RuntimeChildHost.run_ended` sends a
child's outcome to its parent as a message (idempotency key ``child:<id>``:
stored once however many times it is sent), and cancels the children of a
parent that was cancelled.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from agentlog.errors import AgentlogError
from agentlog.eventlog.events import RunStatus
from agentlog.projector._state import RunState
from agentlog.runtime._children import CHILD_TASK, child_key, child_outcome, child_topic, parent_of
from agentlog.runtime._driver import RunDriver
from agentlog.runtime._failures import workflow_modules
from agentlog.runtime._messages import send_message
from agentlog.runtime._requests import RunRequests

__all__ = ["RuntimeChildHost", "children_of"]


class RuntimeChildHost:
    """Starts and reads child runs through a runtime's requests and driver."""

    def __init__(self, driver: RunDriver, requests: RunRequests) -> None:
        self._driver, self._requests = driver, requests

    async def start_child(
        self, workflow: Any, run_id: str, input: Any, parent: Mapping[str, Any]
    ) -> None:
        """Record the child run (idempotent on its id); drive it here if this
        runtime executes runs, else a worker does."""
        here = self._driver.config.execute
        await self._requests.start(workflow, run_id, input, None, None, here, parent=parent)

    async def read_state(self, run_id: str) -> RunState:
        """The run's state, from the log or the archive."""
        return await self._requests.read_state(run_id)

    def modules(self) -> set[str]:
        """The modules of every registered workflow's steps."""
        fns = [s.fn for wf in self._driver.workflows.values() for s in wf.steps.values()]
        return workflow_modules(fns)

    def recheck_seconds(self) -> float:
        """Four leases: a lost wake is made up for soon, a long child costs
        the parent a re-run of its step per period."""
        return self._driver.config.lease_seconds * 4

    async def run_ended(self, state: RunState) -> None:
        """Tell a child's parent that it ended; cancel a cancelled parent's children.

        Best effort: a wake lost here (a crash, a parent held elsewhere too
        long) is found by the parent's step when it runs again, which reads
        the child's state itself.
        """
        parent = parent_of(state)
        if parent is not None:
            with contextlib.suppress(AgentlogError):
                await send_message(
                    self._driver,
                    self._requests.read_state,
                    str(parent["run_id"]),
                    child_topic(state.run_id),
                    child_outcome(state),
                    child_key(state.run_id),
                    self._driver.config.lease_seconds,
                )
        if state.status == RunStatus.CANCELLED:
            for child_id in children_of(state):
                with contextlib.suppress(AgentlogError):
                    await self._requests.cancel(child_id, f"parent {state.run_id!r} cancelled")


def children_of(state: RunState) -> list[str]:
    """The ids of the child runs a run started (its start tasks' results)."""
    return [
        str(task["result"])
        for task in state.tasks.values()
        if str(task.get("name", "")).startswith(CHILD_TASK) and task.get("result")
    ]
