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
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from agentlog._logging import get_logger
from agentlog.errors import (
    AgentlogError,
    ConfigError,
    FencedError,
    LeaseHeldError,
    NoLiveWriterError,
    RunExistsError,
    RunFailedError,
    RunNotFailedError,
    RunNotWaitingError,
    UnknownRunError,
    UnknownWorkflowError,
    VersionMismatchError,
    WorkflowError,
)
from agentlog.eventlog.base import EventLog, RunInfo, check_run_id
from agentlog.eventlog.codec import pack
from agentlog.eventlog.events import (
    EventData,
    ResumeReceived,
    RunCancelled,
    RunMigrated,
    RunRetried,
    RunStarted,
    RunStatus,
    WriterClaimed,
    utcnow,
)
from agentlog.eventlog.urls import DEFAULT_LOG_URL, open_log
from agentlog.projector.snapshots import SnapshotPolicy, load_state
from agentlog.projector.state import RunState, interrupt_id
from agentlog.runtime.executor import RunExecutor
from agentlog.runtime.expects import answers_for
from agentlog.runtime.handles import PendingInterrupt, RecoveryReport, RunHandle
from agentlog.runtime.workflow import Migration, Workflow, check_max_steps
from agentlog.runtime.writer import Durability, RunWriter, check_durability

__all__ = ["VERBS", "Runtime", "RuntimeConfig"]

#: The one verb table: which call does what to a run (in every wrong-verb error).
VERBS = (
    "start: a new run (the same run id returns the existing run); "
    "resume: answer a waiting run's interrupt; "
    "retry: continue a failed run under the same id; "
    "recover: take over running runs whose writer died; "
    "cancel: stop a run"
)

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

    durability: Durability = "async"
    """Default durability mode for new runs: "sync", "async" or "exit"."""

    snapshots: SnapshotPolicy = field(default_factory=SnapshotPolicy)
    """When to save snapshots of a run's state."""

    poll_seconds: float = 0.05
    """How often :meth:`Runtime.wait` polls a run executing in another process."""


def _check_run_id(run_id: str) -> None:
    if not run_id:
        raise ConfigError(
            f"start() needs an explicit, stable run_id (non-empty text), got {run_id!r}"
        )
    check_run_id(run_id)


def _lease_live(info: RunInfo) -> bool:
    return info.lease_expires_at is not None and info.lease_expires_at > utcnow()


def _verb_hint(status: str) -> str:
    """Which verb fits a run in ``status`` (the verb table, in an error)."""
    fits: dict[str, str] = {
        RunStatus.WAITING: "It is waiting: answer it with resume.",
        RunStatus.FAILED: "It failed: continue it with retry.",
        RunStatus.RUNNING: "It is running: wait for it, or recover it if its writer died.",
        RunStatus.COMPLETED: "It is finished: start a new run id, or fork it.",
        RunStatus.CANCELLED: "It was cancelled: start a new run id.",
    }
    return f"{fits.get(status, '')} Verbs: {VERBS}."


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
        workflows: Iterable[Workflow[Any]] = (),
        config: RuntimeConfig | None = None,
    ) -> None:
        self.log = event_log
        self.config = config or RuntimeConfig()
        self.workflows: dict[str, Workflow[Any]] = {}
        self._active: dict[str, tuple[RunExecutor, asyncio.Task[RunState]]] = {}
        self._owns_log = False
        self.register(*workflows)

    @classmethod
    async def open(
        cls,
        url: str = DEFAULT_LOG_URL,
        *,
        workflows: Iterable[Workflow[Any]] = (),
        config: RuntimeConfig | None = None,
    ) -> Runtime:
        """A runtime on the log at ``url`` (closed with the runtime)."""
        runtime = cls(await open_log(url), workflows=workflows, config=config)
        runtime._owns_log = True
        return runtime

    def register(self, *workflows: Workflow[Any]) -> None:
        """Make workflows runnable here (validates their graphs)."""
        for workflow in workflows:
            workflow.validate()
            self.workflows[workflow.name] = workflow

    # -- the calls ------------------------------------------------------------

    async def start(
        self,
        workflow: Workflow[Any] | str,
        *,
        run_id: str,
        input: dict[str, Any] | None = None,
        durability: Durability | None = None,
        max_steps: int | None = None,
    ) -> RunHandle:
        """Start a run, or return the existing run with this id.

        Starting is idempotent on ``run_id``: an existing run is returned as it
        is (and continued here if it is running with no live writer).

        Everything is checked before the run id is claimed, so a call with bad
        arguments leaves nothing behind and a corrected call works at once.

        Raises:
            ConfigError: a bad run id, input, durability or max_steps.
            NotSerializableError: the input cannot be stored.
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
        _check_run_id(run_id)
        mode = durability or self.config.durability
        check_durability(mode)
        if max_steps is not None:
            check_max_steps(max_steps, ConfigError)
        if input is not None and not isinstance(input, dict):
            raise ConfigError(
                f"input must be a dict of state keys to values, got {type(input).__name__}"
            )
        undeclared = sorted(set(input or {}) - set(wf.reducers)) if wf.reducers else []
        if undeclared:
            raise ConfigError(
                f"input keys {undeclared} are not in the state of workflow {wf.name!r} "
                f"(keys: {sorted(wf.reducers)}); declare them in Workflow(state=...)"
            )
        pack(input, path="input")
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
        started = RunStarted(
            workflow=wf.name,
            version=wf.version,
            input=dict(input or {}),
            durability=mode,
            fingerprint=wf.fingerprint,
            limits={"max_steps": max_steps if max_steps is not None else wf.max_steps},
            start=wf.start,
            reducers=dict(wf.reducers),
        )
        # LeaseHeldError here: another writer is starting this run right now
        # and has recorded nothing yet (or died doing so, until its lease ends)
        epoch, deadline = await self._claim(run_id)
        await self._continue(wf, RunState(run_id=run_id), epoch, deadline, mode, [started])
        return RunHandle(self, run_id)

    async def resume(
        self, run_id: str, value: Any = None, *, answers: Mapping[str, Any] | None = None
    ) -> RunHandle:
        """Answer open interrupts and continue the run here.

        With one interrupt open, ``value`` answers it. With several, answer
        one or more by id (see :meth:`pending`): ``resume(run_id, {id: value})``
        or ``resume(run_id, answers={id: value})``; the run goes on with the
        answered branches and parks again while others still wait.

        Raises:
            UnknownRunError: no such run.
            RunNotWaitingError: the run is not parked on an interrupt.
            InvalidResumeValueError: an answer does not fit what its interrupt
                expects, names no open interrupt, or several are open and
                none was named. Nothing is recorded.
            NotSerializableError: an answer cannot be stored. Nothing is recorded.
            VersionMismatchError: the run was recorded under other code.
            LeaseHeldError: another process is resuming it right now.
        """
        state = await load_state(self.log, run_id)
        self._require_waiting(state)
        chosen = answers_for(state, value, answers)
        pack(chosen, path="resume value")  # refused before anything is claimed
        wf = self._workflow(state.workflow)
        self._migration(wf, state)  # fail before anything is recorded

        def events(current: RunState) -> list[EventData]:
            self._require_waiting(current)
            answers_for(current, None, chosen)  # still open, now that we own the run
            return [ResumeReceived(answers=chosen)]

        await self._take_over(wf, run_id, events)
        return RunHandle(self, run_id)

    async def pending(self, run_id: str) -> list[PendingInterrupt]:
        """The run's open interrupts, oldest first (empty unless it is waiting).

        Raises:
            UnknownRunError: no such run.
        """
        state = await self.get_state(run_id)
        return [
            PendingInterrupt(interrupt_id(i), i["step"], i["payload"], i.get("expects"))
            for i in state.interrupts
        ]

    async def retry(self, run_id: str, reason: str = "retried by request") -> RunHandle:
        """Continue a failed run under the same run id, here.

        The run goes on from its last committed superstep: branches whose
        writes are recorded keep them, recorded task results are returned
        without running the effects again, and the other branches run with
        fresh attempts (RunRetried is recorded).

        Raises:
            UnknownRunError: no such run.
            RunNotFailedError: the run has not failed (see :data:`VERBS`).
            VersionMismatchError: the run was recorded under other code.
            LeaseHeldError: another process is retrying it right now.
        """
        state = await load_state(self.log, run_id)
        self._require_failed(state)
        wf = self._workflow(state.workflow)
        self._migration(wf, state)  # fail before anything is recorded

        def events(current: RunState) -> list[EventData]:
            self._require_failed(current)
            return [RunRetried(reason)]

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

    async def wait(self, run_id: str, *, timeout: float | None = None) -> RunState:  # noqa: ASYNC109
        """Wait until the run parks on an interrupt or ends; return its state.

        A run executing in this process is awaited; one executing elsewhere is
        followed through the log for as long as a live writer holds its lease.

        Args:
            timeout: seconds to wait at most (None: no bound).

        Raises:
            NoLiveWriterError: the run is running but no live writer drives it
                (its writer died, or stopped on an error); ``recover()``
                continues it.
            TimeoutError: ``timeout`` passed first; the run is unharmed.
            Whatever stopped this process's writer (FencedError, a contract error).
        """
        async with asyncio.timeout(timeout):
            while True:
                active = self._active.get(run_id)
                if active is not None:  # a snapshot: the live state is the executor's own
                    return (await asyncio.shield(active[1])).copy()
                info = await self.log.get_run(run_id)
                if info.status != RunStatus.RUNNING:
                    return await load_state(self.log, run_id)
                if not _lease_live(info):
                    # A writer writes its last events before it lets go of its
                    # lease: look again before calling the run orphaned.
                    info = await self.log.get_run(run_id)
                    if info.status != RunStatus.RUNNING:
                        continue
                    if not _lease_live(info) and run_id not in self._active:
                        raise NoLiveWriterError(
                            f"run {run_id!r} is running but no live writer drives it (its "
                            f"writer {info.lease_owner or 'unknown'!r} died or stopped on an "
                            "error). Continue it with Runtime.recover() or `agentlog recover`."
                        )
                await asyncio.sleep(self.config.poll_seconds)

    async def get_state(self, run_id: str) -> RunState:
        """The run's state now: this process's live state if it drives the run,
        else the state folded from the log. A copy: changing it changes nothing.

        Raises:
            UnknownRunError: no such run.
        """
        active = self._active.get(run_id)
        if active is not None:
            return active[0].state.copy()
        return await load_state(self.log, run_id)

    async def result(self, run_id: str, *, timeout: float | None = None) -> dict[str, Any]:  # noqa: ASYNC109
        """The final state values of a completed run.

        Raises:
            RunFailedError: the run failed or was cancelled.
            WorkflowError: the run is waiting on an interrupt.
        """
        state = await self.wait(run_id, timeout=timeout)
        if state.status == RunStatus.COMPLETED:
            return state.values
        if state.status == RunStatus.WAITING:
            raise WorkflowError(
                f"run {run_id!r} is waiting on {len(state.interrupts)} interrupt(s), first: "
                f"{state.interrupts[0]['payload']!r}; "
                "resume it first"
            )
        raise RunFailedError(f"run {run_id!r} {state.status}: {state.error}")

    async def recover(self) -> RecoveryReport:
        """Take over every running run whose writer's lease expired.

        One bad run never blocks the others: each run that cannot be taken
        over (an unregistered workflow, a version mismatch, a corrupt event)
        is reported with its typed error, and the rest are recovered.

        Returns:
            The runs now continuing in this process, and those that could not.
        """
        report = RecoveryReport()
        for info in await self.log.list_runs(status=RunStatus.RUNNING):
            if info.run_id in self._active or _lease_live(info):
                continue
            try:
                wf = self._workflow(info.workflow)
                await self._take_over(wf, info.run_id, lambda state: [])
            except (LeaseHeldError, RunNotWaitingError):
                continue  # another process got there first, or it just ended
            except AgentlogError as exc:
                log.warning("run not recovered", run_id=info.run_id, error=str(exc))
                report.failed[info.run_id] = exc
                continue
            report.recovered.append(info.run_id)
        return report

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

    def _workflow(self, name: str) -> Workflow[Any]:
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
                f"nothing was recorded. {_verb_hint(state.status)}"
            )

    @staticmethod
    def _require_failed(state: RunState) -> None:
        if state.status != RunStatus.FAILED:
            raise RunNotFailedError(
                f"run {state.run_id!r} is {state.status}, not failed; nothing was recorded. "
                f"{_verb_hint(state.status)}"
            )

    def _migration(self, wf: Workflow[Any], state: RunState) -> Migration | None:
        """None if the run matches ``wf``; its migration if one is registered."""
        if state.version == wf.version and state.fingerprint in wf.fingerprints:
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

    async def _claim(self, run_id: str) -> tuple[int, float]:
        """Claim the run; return the epoch and when the lease ends by our clock."""
        asked_at = time.monotonic()  # the lease counts from no later than this
        epoch = await self.log.claim_writer(
            run_id,
            owner=self.config.owner,
            lease_seconds=self.config.lease_seconds,
            force=False,
        )
        return epoch, asked_at + self.config.lease_seconds

    async def _take_over(
        self,
        wf: Workflow[Any],
        run_id: str,
        events: Callable[[RunState], Sequence[EventData]],
    ) -> None:
        """Claim the run, reload it, record ``events(state)`` and continue it here."""
        epoch, deadline = await self._claim(run_id)
        try:
            state = await load_state(self.log, run_id, reducers=wf.reducer_table)
            migration = self._migration(wf, state)
            extra = events(state)
            if state.status != RunStatus.RUNNING and not extra:
                raise RunNotWaitingError(f"run {run_id!r} is {state.status}; nothing to do")
            first: list[EventData] = [WriterClaimed(epoch, self.config.owner)]
            if migration is not None:
                values = migration(dict(state.values))
                first.append(
                    RunMigrated(
                        state.version, wf.version, wf.fingerprint, dict(wf.reducers), values
                    )
                )
        except BaseException:
            await self._release(run_id, epoch)
            raise
        mode = state.durability or self.config.durability
        await self._continue(wf, state, epoch, deadline, mode, [*first, *extra])

    async def _continue(
        self,
        wf: Workflow[Any],
        state: RunState,
        epoch: int,
        deadline: float,
        mode: str,
        events: Sequence[EventData],
    ) -> None:
        """As the run's claimed writer: record ``events``, then drive the run here.

        On any failure before the run is handed to its task, the writer is
        dropped and the lease released, so a corrected call can claim at once.
        """
        writer = None
        try:
            writer = RunWriter(
                self.log,
                state,
                epoch=epoch,
                durability=mode,
                snapshots=self.config.snapshots,
                lease_deadline=deadline,
                reducers=wf.reducer_table,
            )
            for data in events:
                writer.emit(data)
            await writer.flush()
        except BaseException:
            if writer is not None:
                writer.abandon()
            await self._release(state.run_id, epoch)
            raise
        self._launch(wf, writer)

    def _launch(self, wf: Workflow[Any], writer: RunWriter) -> None:
        executor = RunExecutor(writer, wf)
        run_id = writer.state.run_id
        task = asyncio.create_task(self._drive(executor), name=f"agentlog run {run_id}")
        self._active[run_id] = (executor, task)
        task.add_done_callback(lambda _: self._active.pop(run_id, None))

    async def _drive(self, executor: RunExecutor) -> RunState:
        writer = executor.writer
        run_id, epoch = writer.state.run_id, writer.epoch
        fenced: list[FencedError] = []
        heartbeat = asyncio.create_task(self._heartbeat(writer, asyncio.current_task(), fenced))
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
        writer: RunWriter,
        owner: asyncio.Task[Any] | None,
        fenced: list[FencedError],
    ) -> None:
        run_id, epoch, lease = writer.state.run_id, writer.epoch, self.config.lease_seconds
        while True:
            await asyncio.sleep(lease / 3)
            sent_at = time.monotonic()
            try:
                await self.log.renew_lease(run_id, epoch, lease)
            except FencedError as exc:
                log.warning("writer fenced; stopping", run_id=run_id, epoch=epoch)
                writer.fence(exc)  # no side effect may start from here on
                fenced.append(exc)
                if owner is not None:
                    owner.cancel()
                return
            except Exception as exc:  # storage hiccup: the next renewal may work
                log.warning("lease renewal failed", run_id=run_id, error=str(exc))
            else:
                writer.lease_renewed(sent_at, lease)

    async def _release(self, run_id: str, epoch: int) -> None:
        with contextlib.suppress(FencedError, UnknownRunError):
            await self.log.release_lease(run_id, epoch)
