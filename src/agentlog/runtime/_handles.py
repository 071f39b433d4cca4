"""What callers hold and get back: a run's handle, its open interrupts, a recovery report."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from agentlog.errors import AgentlogError
from agentlog.eventlog._base import EventLog, RunInfo
from agentlog.eventlog.events import RunStatus
from agentlog.projector._reducers import Reducer
from agentlog.projector._state import RunState
from agentlog.runtime._stream import StreamMode, StreamUntil, StreamUpdate, stream
from agentlog.runtime._workflow import Workflow

__all__ = ["PendingInterrupt", "RecoveryReport", "RunCalls", "RunHandle"]


class RunCalls(Protocol):
    """What a :class:`RunHandle` calls: the runtime's calls on one run (a
    :class:`~agentlog.runtime._runtime.Runtime` is one). A protocol, so that
    this module, beneath the runtime, never imports it."""

    @property
    def log(self) -> EventLog:
        """The log the runs are recorded in."""
        ...

    @property
    def workflows(self) -> Mapping[str, Workflow[Any, Any]]:
        """The workflow code registered here, by name."""
        ...

    async def wait(self, run_id: str, *, timeout: float | None = None) -> RunState:  # noqa: ASYNC109
        """See :meth:`Runtime.wait`."""
        ...

    async def result(self, run_id: str, *, timeout: float | None = None) -> dict[str, Any]:  # noqa: ASYNC109
        """See :meth:`Runtime.result`."""
        ...

    async def get_state(self, run_id: str) -> RunState:
        """See :meth:`Runtime.get_state`."""
        ...

    async def resume(
        self, run_id: str, value: Any = None, *, answers: Mapping[str, Any] | None = None
    ) -> RunHandle:
        """See :meth:`Runtime.resume`."""
        ...

    async def pending(self, run_id: str) -> list[PendingInterrupt]:
        """See :meth:`Runtime.pending`."""
        ...

    async def retry(self, run_id: str, reason: str = ...) -> RunHandle:
        """See :meth:`Runtime.retry`."""
        ...

    async def cancel(self, run_id: str, reason: str = ...) -> RunState:
        """See :meth:`Runtime.cancel`."""
        ...


@dataclass(frozen=True, slots=True)
class RunHandle:
    """A run known to a runtime."""

    runtime: RunCalls
    run_id: str

    async def wait(self, *, timeout: float | None = None) -> RunState:  # noqa: ASYNC109
        """Wait until the run parks or ends; see :meth:`Runtime.wait`."""
        return await self.runtime.wait(self.run_id, timeout=timeout)

    async def result(self, *, timeout: float | None = None) -> dict[str, Any]:  # noqa: ASYNC109
        """The final values of the completed run; see :meth:`Runtime.result`."""
        return await self.runtime.result(self.run_id, timeout=timeout)

    async def state(self) -> RunState:
        """The run's state now, without waiting; see :meth:`Runtime.get_state`."""
        return await self.runtime.get_state(self.run_id)

    async def status(self) -> str:
        """The run's status now: one of :class:`RunStatus` (``queued`` while
        its queue has not admitted it: the run index's word, docs/queues.md)."""
        status = (await self.runtime.get_state(self.run_id)).status
        if status == RunStatus.RUNNING:
            info = await self.runtime.log.find_run(self.run_id)
            if info is not None and info.status == RunStatus.QUEUED:
                return RunStatus.QUEUED
        return status

    async def resume(
        self, value: Any = None, *, answers: Mapping[str, Any] | None = None
    ) -> RunHandle:
        """Answer open interrupts; see :meth:`Runtime.resume`."""
        return await self.runtime.resume(self.run_id, value, answers=answers)

    async def pending(self) -> list[PendingInterrupt]:
        """The open interrupts; see :meth:`Runtime.pending`."""
        return await self.runtime.pending(self.run_id)

    async def retry(self) -> RunHandle:
        """Continue the failed run; see :meth:`Runtime.retry`."""
        return await self.runtime.retry(self.run_id)

    async def cancel(self, reason: str = "cancelled by request") -> RunState:
        """Cancel the run; see :meth:`Runtime.cancel`."""
        return await self.runtime.cancel(self.run_id, reason)

    def stream(
        self, mode: StreamMode = "updates", *, after_seq: int = 0, until: StreamUntil = "end"
    ) -> AsyncIterator[StreamUpdate]:
        """Follow the run live; see :func:`agentlog.runtime._stream.stream`.

        ``values`` fold with the run's workflow's own reducers when this
        runtime has the workflow registered.
        """
        workflows = self.runtime.workflows

        def reducers(name: str) -> Mapping[str, Reducer] | None:
            workflow = workflows.get(name)
            return workflow.reducer_table if workflow is not None else None

        return stream(
            self.runtime.log,
            self.run_id,
            mode=mode,
            after_seq=after_seq,
            until=until,
            reducers=reducers,
        )


@dataclass(frozen=True, slots=True)
class PendingInterrupt:
    """An open interrupt of a waiting run (see :meth:`Runtime.pending`)."""

    id: str
    """Answer it with ``resume(run_id, {id: value})``."""

    step: str
    """The step that asked."""

    payload: Any
    """What the step showed."""

    expects: Any
    """The answer's shape (a type name, or a dict of them), or None for any."""

    timeout_at: datetime | None = None
    """When the interrupt times out with no answer (``interrupt(timeout=...)``), if ever."""


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What :meth:`Runtime.recover` did."""

    recovered: list[str] = field(default_factory=list)
    """Run ids now continuing in this process."""

    failed: dict[str, AgentlogError] = field(default_factory=dict)
    """Run ids it could not recover, each with the typed reason."""

    held: list[RunInfo] = field(default_factory=list)
    """Running runs it left alone because a writer's lease on them is live
    (each index row names the writer and when its lease ends): a live
    writer, or a dead one whose lease has not run out yet."""

    @property
    def ok(self) -> bool:
        """True when every run that needed recovery was recovered."""
        return not self.failed
