"""Runtime: start, resume, cancel, wait for and recover durable runs.

::

    rt = await Runtime.open("sqlite:///.agentlog/agentlog.db", workflows=[wf])
    await rt.start(wf, run_id="ticket-42", input={"topic": "..."})
    state = await rt.wait("ticket-42")          # parked on an interrupt
    await rt.resume("ticket-42", {"approved": True})   # days later, any process
    values = await rt.result("ticket-42")

Every call takes an explicit run id. Starting an existing run returns that
run (and continues it if no live writer owns it); it never forks a second
history. A run that waits on an interrupt is only records in the log. A
writer holds a lease that it renews while it works; :meth:`Runtime.recover`
takes over runs whose writer died (lease expired) and leaves live ones alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from agentlog._logging import get_logger
from agentlog.errors import (
    FencedError,
    InvalidResumeValueError,
    LeaseHeldError,
    RunExistsError,
    RunFailedError,
    RunNotWaitingError,
    UnknownRunError,
    UnknownWorkflowError,
    VersionMismatchError,
    WorkflowError,
)
from agentlog.eventlog.base import EventLog
from agentlog.eventlog.events import (
    EventData,
    ResumeReceived,
    RunCancelled,
    RunMigrated,
    RunStarted,
    RunStatus,
    WriterClaimed,
    utcnow,
)
from agentlog.eventlog.urls import DEFAULT_LOG_URL, open_log
from agentlog.projector.snapshots import SnapshotPolicy, load_state
from agentlog.projector.state import RunState
from agentlog.runtime.executor import RunExecutor
from agentlog.runtime.workflow import Migration, Workflow
from agentlog.runtime.writer import RunWriter

__all__ = ["RunHandle", "Runtime", "RuntimeConfig"]

log = get_logger("agentlog.runtime")


def _default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """How a runtime writes."""

    owner: str = field(default_factory=_default_owner)
    """Who this writer is, shown in the run index (default: host:pid)."""

    lease_seconds: float = 30.0
    """How long a writer's claim lives without renewal; renewed every third of it."""

    durability: str = "async"
    """Default durability mode for new runs: "sync", "async" or "exit"."""

    snapshots: SnapshotPolicy = field(default_factory=SnapshotPolicy)
    """When to save snapshots of a run's state."""

    poll_seconds: float = 0.05
    """How often :meth:`Runtime.wait` polls a run executing in another process."""


@dataclass(frozen=True, slots=True)
class RunHandle:
    """A run known to a runtime."""

    runtime: Runtime
    run_id: str

    async def wait(self) -> RunState:
        """See :meth:`Runtime.wait`."""
        return await self.runtime.wait(self.run_id)


_TYPE_NAMES: dict[str, type | tuple[type, ...]] = {
    "str": str,
    "bool": bool,
    "int": int,
    "float": (int, float),
    "list": list,
    "dict": dict,
}


def _check_expected(expects: Any, value: Any, where: str = "value") -> None:
    """Check a resume value against an interrupt's ``expects``."""
    if expects is None or expects == "any":
        return
    if isinstance(expects, dict):
        if not isinstance(value, dict):
            raise InvalidResumeValueError(
                f"{where} must be an object with keys {sorted(expects)}, got "
                f"{type(value).__name__}; resume again with the right shape"
            )
        for key, sub in expects.items():
            if key not in value:
                raise InvalidResumeValueError(f"{where} is missing key {key!r}; resume again")
            _check_expected(sub, value[key], f"{where}[{key!r}]")
        return
    wanted = _TYPE_NAMES.get(str(expects))
    if wanted is None:
        return
    # bool is an int in Python, but True is not an answer to "int"
    ok = isinstance(value, bool) if wanted is bool else isinstance(value, wanted)
    if not ok or (wanted is not bool and isinstance(value, bool)):
        raise InvalidResumeValueError(
            f"{where} must be {expects}, got {type(value).__name__} {value!r}; resume again "
            "with the right shape (the run is still waiting)"
        )


class Runtime:
    """Runs workflows durably on an :class:`EventLog`.

    Args:
        event_log: where runs are recorded.
        workflows: the workflow code this process can run, by name.
        config: owner, lease, default durability, snapshot policy.
    """

    def __init__(
        self,
        event_log: EventLog,
        *,
        workflows: Iterable[Workflow] = (),
        config: RuntimeConfig | None = None,
    ) -> None:
        self.log = event_log
        self.config = config or RuntimeConfig()
        self.workflows: dict[str, Workflow] = {}
        self._active: dict[str, tuple[RunExecutor, asyncio.Task[RunState]]] = {}
        self._owns_log = False
        self.register(*workflows)

    @classmethod
    async def open(
        cls,
        url: str = DEFAULT_LOG_URL,
        *,
        workflows: Iterable[Workflow] = (),
        config: RuntimeConfig | None = None,
    ) -> Runtime:
        """A runtime on the log at ``url`` (closed with the runtime)."""
        runtime = cls(await open_log(url), workflows=workflows, config=config)
        runtime._owns_log = True
        return runtime

    def register(self, *workflows: Workflow) -> None:
        """Make workflows runnable here (validates their graphs)."""
        for workflow in workflows:
            workflow.validate()
            self.workflows[workflow.name] = workflow

    # -- the calls ------------------------------------------------------------

    async def start(
        self,
        workflow: Workflow | str,
        *,
        run_id: str,
        input: dict[str, Any] | None = None,
        durability: str | None = None,
        max_steps: int | None = None,
    ) -> RunHandle:
        """Start a run, or return the existing run with this id.

        Starting is idempotent on ``run_id``: an existing run is returned as it
        is (and continued here if it is running with no live writer).

        Raises:
            RunExistsError: the run id belongs to a run of another workflow.
            UnknownWorkflowError: ``workflow`` is a name not registered here.
            LeaseHeldError: another process is starting this run id right now
                and has recorded nothing yet; retry after its lease.
        """
        if isinstance(workflow, Workflow):
            if self.workflows.get(workflow.name) is not workflow:
                self.register(workflow)
            wf = workflow
        else:
            wf = self._workflow(workflow)
        if not run_id:
            raise WorkflowError("start() needs an explicit, stable run_id")
        info = await self.log.find_run(run_id)
        if info is not None and info.last_seq > 0:
            if info.workflow != wf.name:
                raise RunExistsError(
                    f"run {run_id!r} exists and belongs to workflow {info.workflow!r}, "
                    f"not {wf.name!r}; pick another run id"
                )
            if run_id not in self._active and info.status == RunStatus.RUNNING:
                with contextlib.suppress(LeaseHeldError):
                    await self._take_over(wf, run_id, lambda state: [])
            return RunHandle(self, run_id)
        mode = durability or self.config.durability
        # LeaseHeldError here: another writer is starting this run right now
        # and has recorded nothing yet (or died doing so, until its lease ends)
        epoch = await self._claim(run_id)
        writer = RunWriter(
            self.log,
            RunState(run_id=run_id),
            epoch=epoch,
            durability=mode,
            snapshots=self.config.snapshots,
        )
        writer.emit(
            RunStarted(
                workflow=wf.name,
                version=wf.version,
                input=dict(input or {}),
                durability=mode,
                fingerprint=wf.fingerprint,
                limits={"max_steps": max_steps or wf.max_steps},
                start=wf.start,
                reducers=dict(wf.reducers),
            )
        )
        await writer.flush()
        self._launch(wf, writer)
        return RunHandle(self, run_id)

    async def resume(self, run_id: str, value: Any = None) -> RunHandle:
        """Answer the run's open interrupt and continue the run here.

        Raises:
            UnknownRunError: no such run.
            RunNotWaitingError: the run is not parked on an interrupt.
            InvalidResumeValueError: ``value`` does not fit what the interrupt expects.
            VersionMismatchError: the run was recorded under other code.
            LeaseHeldError: another process is resuming it right now.
        """
        state = await load_state(self.log, run_id)
        self._require_waiting(state)
        _check_expected(state.interrupts[0].get("expects"), value)
        wf = self._workflow(state.workflow)
        self._migration(wf, state)  # fail before anything is recorded

        def events(current: RunState) -> list[EventData]:
            self._require_waiting(current)
            return [ResumeReceived(value)]

        await self._take_over(wf, run_id, events)
        return RunHandle(self, run_id)

    async def cancel(self, run_id: str, reason: str = "cancelled by request") -> RunState:
        """Cancel the run at its next step boundary; return its final state.

        A run executing here stops at its next step boundary. A run parked or
        executing elsewhere is taken over (which fences its writer) and
        cancelled. Cancelling a finished run changes nothing.
        """
        active = self._active.get(run_id)
        if active is not None:
            active[0].cancel_requested.set()
            return await self.wait(run_id)
        state = await load_state(self.log, run_id)
        if state.is_terminal:
            return state
        epoch = await self.log.claim_writer(run_id, owner=self.config.owner, force=True)
        state = await load_state(self.log, run_id)
        writer = RunWriter(
            self.log, state, epoch=epoch, durability="sync", snapshots=self.config.snapshots
        )
        if not state.is_terminal:
            writer.emit(WriterClaimed(epoch, self.config.owner))
            writer.emit(RunCancelled(reason))
        await writer.close()
        await self._release(run_id, epoch)
        return writer.state

    async def wait(self, run_id: str) -> RunState:
        """Wait until the run parks on an interrupt or ends; return its state.

        A run executing in this process is awaited; one executing elsewhere is
        followed through the log.

        Raises:
            Whatever stopped this process's writer (FencedError, a contract error).

        Wrap it in ``asyncio.timeout()`` to bound the wait.
        """
        active = self._active.get(run_id)
        if active is not None:
            return await asyncio.shield(active[1])
        while True:
            state = await load_state(self.log, run_id)
            if state.status != RunStatus.RUNNING:
                return state
            await asyncio.sleep(self.config.poll_seconds)

    async def result(self, run_id: str) -> dict[str, Any]:
        """The final state values of a completed run.

        Raises:
            RunFailedError: the run failed or was cancelled.
            WorkflowError: the run is waiting on an interrupt.
        """
        state = await self.wait(run_id)
        if state.status == RunStatus.COMPLETED:
            return state.values
        if state.status == RunStatus.WAITING:
            raise WorkflowError(
                f"run {run_id!r} is waiting on an interrupt: {state.interrupts[0]['payload']!r}; "
                "resume it first"
            )
        raise RunFailedError(f"run {run_id!r} {state.status}: {state.error}")

    async def recover(self) -> list[str]:
        """Take over every running run whose writer's lease expired.

        Returns:
            The run ids now continuing in this process. Runs of workflows not
            registered here are left alone (and logged).
        """
        taken = []
        now = utcnow()
        for info in await self.log.list_runs(status=RunStatus.RUNNING):
            if info.run_id in self._active:
                continue
            if info.lease_expires_at is not None and info.lease_expires_at > now:
                continue
            wf = self.workflows.get(info.workflow)
            if wf is None:
                log.warning("not recovered: workflow not registered", run_id=info.run_id)
                continue
            try:
                await self._take_over(wf, info.run_id, lambda state: [])
            except (LeaseHeldError, RunNotWaitingError):
                continue
            taken.append(info.run_id)
        return taken

    async def close(self) -> None:
        """Stop executing (runs stay resumable) and close an owned log."""
        for _, task in list(self._active.values()):
            task.cancel()
        for _, task in list(self._active.values()):
            with contextlib.suppress(BaseException):
                await task
        if self._owns_log:
            await self.log.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- internals ------------------------------------------------------------------

    def _workflow(self, name: str) -> Workflow:
        wf = self.workflows.get(name)
        if wf is None:
            raise UnknownWorkflowError(
                f"workflow {name!r} is not registered with this runtime (registered: "
                f"{sorted(self.workflows)}); pass it in Runtime(workflows=[...])"
            )
        return wf

    @staticmethod
    def _require_waiting(state: RunState) -> None:
        if state.status != RunStatus.WAITING or not state.interrupts:
            raise RunNotWaitingError(
                f"run {state.run_id!r} is {state.status}, not waiting on an interrupt; "
                "nothing was recorded"
            )

    def _migration(self, wf: Workflow, state: RunState) -> Migration | None:
        """None if the run matches ``wf``; its migration if one is registered."""
        if state.version == wf.version and state.fingerprint == wf.fingerprint:
            return None
        migration = wf.migrations.get(state.version)
        if migration is None:
            raise VersionMismatchError(
                f"run {state.run_id!r} was recorded by {state.workflow!r} version "
                f"{state.version} (state schema {state.fingerprint}); this code is version "
                f"{wf.version} (state schema {wf.fingerprint}). Finish the run under the old "
                f"code, or register @workflow.migration({state.version!r})."
            )
        return migration

    async def _claim(self, run_id: str) -> int:
        return await self.log.claim_writer(
            run_id,
            owner=self.config.owner,
            lease_seconds=self.config.lease_seconds,
            force=False,
        )

    async def _take_over(
        self,
        wf: Workflow,
        run_id: str,
        events: Callable[[RunState], Sequence[EventData]],
    ) -> None:
        """Claim the run, reload it, record ``events(state)`` and continue it here."""
        epoch = await self._claim(run_id)
        try:
            state = await load_state(self.log, run_id)
            migration = self._migration(wf, state)
            extra = events(state)
            if state.status != RunStatus.RUNNING and not extra:
                raise RunNotWaitingError(f"run {run_id!r} is {state.status}; nothing to do")
        except BaseException:
            await self._release(run_id, epoch)
            raise
        writer = RunWriter(
            self.log,
            state,
            epoch=epoch,
            durability=state.durability or self.config.durability,
            snapshots=self.config.snapshots,
        )
        writer.emit(WriterClaimed(epoch, self.config.owner))
        if migration is not None:
            writer.emit(
                RunMigrated(
                    state.version,
                    wf.version,
                    wf.fingerprint,
                    dict(wf.reducers),
                    migration(dict(state.values)),
                )
            )
        for data in extra:
            writer.emit(data)
        await writer.flush()
        self._launch(wf, writer)

    def _launch(self, wf: Workflow, writer: RunWriter) -> None:
        executor = RunExecutor(writer, wf)
        run_id = writer.state.run_id
        task = asyncio.create_task(self._drive(executor), name=f"agentlog run {run_id}")
        self._active[run_id] = (executor, task)
        task.add_done_callback(lambda _: self._active.pop(run_id, None))

    async def _drive(self, executor: RunExecutor) -> RunState:
        writer = executor.writer
        run_id, epoch = writer.state.run_id, writer.epoch
        fenced: list[FencedError] = []
        heartbeat = asyncio.create_task(
            self._heartbeat(run_id, epoch, asyncio.current_task(), fenced)
        )
        try:
            return await executor.run()
        except asyncio.CancelledError:
            if fenced:  # the heartbeat found a newer writer: say so, not "cancelled"
                raise fenced[0] from None
            raise
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            await self._release(run_id, epoch)

    async def _heartbeat(
        self,
        run_id: str,
        epoch: int,
        owner: asyncio.Task[Any] | None,
        fenced: list[FencedError],
    ) -> None:
        while True:
            await asyncio.sleep(self.config.lease_seconds / 3)
            try:
                await self.log.renew_lease(run_id, epoch, self.config.lease_seconds)
            except FencedError as exc:
                log.warning("writer fenced; stopping", run_id=run_id, epoch=epoch)
                fenced.append(exc)
                if owner is not None:
                    owner.cancel()
                return
            except Exception as exc:  # storage hiccup: the next renewal may work
                log.warning("lease renewal failed", run_id=run_id, error=str(exc))

    async def _release(self, run_id: str, epoch: int) -> None:
        with contextlib.suppress(FencedError, UnknownRunError):
            await self.log.release_lease(run_id, epoch)
