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
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
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
from agentlog.eventlog.base import Command, EventLog, RunInfo, check_run_id
from agentlog.eventlog.codec import pack
from agentlog.eventlog.events import (
    EventData,
    ResumeReceived,
    RunCancelled,
    RunMigrated,
    RunRetried,
    RunStarted,
    RunStatus,
    TimerFired,
    WriterClaimed,
    utcnow,
)
from agentlog.eventlog.urls import DEFAULT_LOG_URL, open_log
from agentlog.projector.snapshots import SnapshotPolicy, load_state
from agentlog.projector.state import RunState, due_timers, input_interrupts, interrupt_id
from agentlog.runtime.commands import apply_command
from agentlog.runtime.executor import RunExecutor
from agentlog.runtime.expects import answers_for
from agentlog.runtime.handles import PendingInterrupt, RecoveryReport, RunHandle
from agentlog.runtime.stream import StreamMode, StreamUntil, StreamUpdate
from agentlog.runtime.worker import Worker, WorkerConfig
from agentlog.runtime.workflow import Migration, Workflow, check_max_steps
from agentlog.runtime.writer import Durability, RunWriter, check_durability

__all__ = ["VERBS", "Runtime", "RuntimeConfig"]

#: The one verb table: which call does what to a run (in every wrong-verb error).
VERBS = (
    "start: a new run (the same run id returns the existing run); "
    "submit: record a new run for a worker to drive; "
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

    execute: bool = True
    """``start``, ``resume`` and ``retry`` continue the run in this process.
    False makes this runtime a client: they record the request durably (the
    run, the answer, the retry) and a worker drives the run."""

    worker: bool = True
    """Run a worker in this process, in the background, from the first call
    that moves a run: it fires due timers, drives submitted runs and takes
    over runs whose writer died (see :mod:`agentlog.runtime.worker`)."""

    worker_config: WorkerConfig = field(default_factory=WorkerConfig)
    """Concurrency limits and polling of this process's worker."""

    orphan_grace_seconds: float = 5.0
    """How long :meth:`Runtime.wait` lets a run that needs a driver go
    without one (no live worker took it) before it raises NoLiveWriterError."""


def _check_run_id(run_id: str) -> None:
    if not run_id:
        raise ConfigError(
            f"start() needs an explicit, stable run_id (non-empty text), got {run_id!r}"
        )
    check_run_id(run_id)


def _lease_live(info: RunInfo) -> bool:
    return info.lease_expires_at is not None and info.lease_expires_at > utcnow()


def _settled(state: RunState) -> bool:
    """True once the run ended or parked on an interrupt a human answers."""
    if state.status == RunStatus.WAITING:
        return bool(input_interrupts(state))
    return state.status in RunStatus.TERMINAL


def _orphan_message(info: RunInfo, grace: float) -> str:
    why = (
        f"its timer was due at {info.wake_at:%Y-%m-%d %H:%M:%S} UTC"
        if info.status == RunStatus.WAITING
        else f"it is running and its last writer {info.lease_owner or 'unknown'!r} is gone"
    )
    return (
        f"run {info.run_id!r} needs a driver ({why}) and no live worker took it in "
        f"{grace:g}s. Start a worker that knows workflow {info.workflow!r} "
        "(agentlog worker --app module:attr), or continue it here with "
        "Runtime.recover() or `agentlog recover`."
    )


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
        self.worker = Worker(self, self.config.worker_config)
        self._worker_task: asyncio.Task[None] | None = None
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
        return await self._start(
            workflow, run_id, input, durability, max_steps, self.config.execute
        )

    async def submit(
        self,
        workflow: Workflow[Any] | str,
        *,
        run_id: str,
        input: dict[str, Any] | None = None,
        durability: Durability | None = None,
        max_steps: int | None = None,
    ) -> RunHandle:
        """Record a new run for a worker to drive; do not execute it here.

        Like :meth:`start`, it is idempotent on ``run_id`` and checks
        everything before anything is recorded. The run is durable when this
        returns: a worker (this process's, with ``RuntimeConfig(worker=True)``,
        or ``agentlog worker`` anywhere on the same log) takes it.

        Raises:
            The errors of :meth:`start`.
        """
        return await self._start(workflow, run_id, input, durability, max_steps, False)

    async def _start(
        self,
        workflow: Workflow[Any] | str,
        run_id: str,
        input: dict[str, Any] | None,
        durability: Durability | None,
        max_steps: int | None,
        here: bool,
    ) -> RunHandle:
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
        self._ensure_worker()
        info = await self.log.find_run(run_id)
        if info is not None and info.last_seq > 0:
            if info.workflow != wf.name:
                raise RunExistsError(
                    f"run {run_id!r} exists and belongs to workflow {info.workflow!r}, "
                    f"not {wf.name!r}; pick another run id"
                )
            if here and run_id not in self._active and info.status == RunStatus.RUNNING:
                with contextlib.suppress(LeaseHeldError, RunNotWaitingError):
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
        if not self.log.direct_writes:  # the run's owning worker records it
            await self._send(Command(run_id, "start", started))
            return RunHandle(self, run_id)
        # LeaseHeldError here: another writer is starting this run right now
        # and has recorded nothing yet (or died doing so, until its lease ends)
        epoch, deadline = await self._claim(run_id)
        await self._continue(wf, RunState(run_id=run_id), epoch, deadline, mode, [started], here)
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

        self._ensure_worker()
        if not self.log.direct_writes:
            await self._send(Command(run_id, "resume", ResumeReceived(answers=chosen)))
        else:
            await self._take_over(wf, run_id, events, here=self.config.execute)
        return RunHandle(self, run_id)

    async def pending(self, run_id: str) -> list[PendingInterrupt]:
        """The run's open interrupts, oldest first (empty unless it is waiting).

        Raises:
            UnknownRunError: no such run.
        """
        state = await self.get_state(run_id)
        return [
            PendingInterrupt(
                interrupt_id(i), i["step"], i["payload"], i.get("expects"), i.get("due_at")
            )
            for i in input_interrupts(state)
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

        self._ensure_worker()
        if not self.log.direct_writes:
            await self._send(Command(run_id, "retry", RunRetried(reason)))
        else:
            await self._take_over(wf, run_id, events, here=self.config.execute)
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
        if not self.log.direct_writes:
            # The owning worker applies it; give it a moment, then say how it stands.
            await self._send(Command(run_id, "cancel", RunCancelled(reason)))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.orphan_grace_seconds):
                    while not (state := await load_state(self.log, run_id)).is_terminal:  # noqa: ASYNC110 - polls the log
                        await asyncio.sleep(self.config.poll_seconds)
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
        """Wait until the run ends or parks on an interrupt a human answers;
        return its state.

        A run that sleeps on a timer is not parked for a human: ``wait`` goes
        on while a worker fires the timer. A run executing in this process is
        awaited; one executing elsewhere is followed through the log.

        Args:
            timeout: seconds to wait at most (None: no bound).

        Raises:
            NoLiveWriterError: the run needs a driver (it is running, or its
                timer is due) and no live worker took it within
                ``RuntimeConfig.orphan_grace_seconds``: start a worker
                (``agentlog worker``) or ``recover()`` it here.
            TimeoutError: ``timeout`` passed first; the run is unharmed.
            Whatever stopped this process's writer (FencedError, a contract error).
        """
        self._ensure_worker()
        orphaned_at: float | None = None
        async with asyncio.timeout(timeout):
            while True:
                active = self._active.get(run_id)
                if active is not None and not active[1].done():
                    # A snapshot: the live state is the executor's own.
                    state = (await asyncio.shield(active[1])).copy()
                    if _settled(state):
                        return state
                    continue  # asleep on a timer, or handed over: a worker goes on
                if active is not None:  # ended just now: its result says how
                    state = active[1].result().copy()
                    if _settled(state):
                        return state
                info = await self.log.get_run(run_id)
                if info.status in RunStatus.TERMINAL:
                    return await load_state(self.log, run_id)
                if info.status == RunStatus.WAITING:
                    state = await load_state(self.log, run_id)
                    if _settled(state):
                        return state
                if not info.needs_worker(utcnow()) or self._will_drive(info):
                    orphaned_at = None
                elif orphaned_at is None:
                    orphaned_at = time.monotonic()
                elif time.monotonic() - orphaned_at > self.config.orphan_grace_seconds:
                    raise NoLiveWriterError(_orphan_message(info, self.config.orphan_grace_seconds))
                await asyncio.sleep(self.config.poll_seconds)

    def stream(
        self,
        run_id: str,
        mode: StreamMode = "updates",
        *,
        after_seq: int = 0,
        until: StreamUntil = "end",
    ) -> AsyncIterator[StreamUpdate]:
        """Follow the run live, from any process: ``async for update in
        rt.stream(run_id, mode="values")``; see :func:`agentlog.runtime.stream.stream`."""
        return RunHandle(self, run_id).stream(mode, after_seq=after_seq, until=until)

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

    # -- the worker ---------------------------------------------------------------

    async def serve(self) -> None:
        """Run this process's worker in the foreground until ``worker.stop()``
        (``agentlog worker`` calls it and stops it on SIGTERM), then hand every
        run over: each finishes its current superstep and is released."""
        if self._worker_task is not None and not self._worker_task.done():
            raise ConfigError("this runtime's worker already runs (in the background)")
        await self.worker.run()

    @property
    def active_runs(self) -> Mapping[str, RunExecutor]:
        """The runs this process drives right now, by run id."""
        return {run_id: active[0] for run_id, active in self._active.items()}

    def active_task(self, run_id: str) -> asyncio.Task[RunState] | None:
        """The task driving ``run_id`` in this process, if one does."""
        active = self._active.get(run_id)
        return None if active is None else active[1]

    def active_count(self, workflow: str) -> int:
        """How many runs of ``workflow`` this process drives right now."""
        return sum(1 for ex, _ in self._active.values() if ex.workflow.name == workflow)

    async def take_over(self, wf: Workflow[Any], run_id: str) -> None:
        """Claim a running run that no live writer holds and drive it here.

        Raises:
            LeaseHeldError: another writer holds it.
            RunNotWaitingError: it is not running any more.
        """
        await self._take_over(wf, run_id, lambda state: [])

    async def record(
        self,
        run_id: str,
        events: Callable[[RunState], Sequence[EventData]],
        *,
        start: RunStarted | None = None,
    ) -> None:
        """As the run's owner: record ``events(state)`` (or ``start``, a new
        run) and drive the run here if its workflow is registered; else leave
        it recorded for a worker that knows the workflow.

        Raises:
            LeaseHeldError: another writer holds the run.
            RunNotWaitingError: ``events`` gave nothing to record.
        """
        if start is not None:
            wf = self.workflows.get(start.workflow)
            epoch, deadline = await self._claim(run_id)
            await self._continue(
                wf,
                RunState(run_id=run_id),
                epoch,
                deadline,
                start.durability,
                [start],
                wf is not None,
            )
            return
        wf = self.workflows.get((await self.log.get_run(run_id)).workflow)
        await self._take_over(wf, run_id, events, here=wf is not None)

    async def apply_command(self, command: Command) -> bool:
        """Apply a client's command as the run's owner (see
        :mod:`agentlog.runtime.commands`); True once it may be acked."""
        return await apply_command(self, command)

    async def fire_timers(self, wf: Workflow[Any], run_id: str) -> None:
        """Record TimerFired for the run's due timers and drive it here.

        Raises:
            LeaseHeldError: another writer holds it.
            RunNotWaitingError: no timer of the run is due (any more).
        """

        def events(state: RunState) -> list[EventData]:
            due = due_timers(state, utcnow()) if state.status == RunStatus.WAITING else []
            if not due:
                raise RunNotWaitingError(f"run {run_id!r} has no due timer")
            return [TimerFired(due)]

        await self._take_over(wf, run_id, events)

    async def hand_over(self) -> None:
        """Let every run driven here finish its current superstep, record it,
        and release its lease, so that another worker continues it at once."""
        for executor, _ in list(self._active.values()):
            executor.hand_over_requested.set()
        for _, task in list(self._active.values()):
            with contextlib.suppress(BaseException):
                await task

    async def _send(self, command: Command) -> None:
        """Send a request to the run's owning worker (logs without direct writes)."""
        await self.log.send_command(command)
        self.worker.wake.set()  # this process's worker may own the run

    def _ensure_worker(self) -> None:
        """Start the background worker, once, if this runtime runs one."""
        if self.config.worker and self._worker_task is None:
            self._worker_task = asyncio.create_task(self.worker.run(), name="agentlog worker")

    def _will_drive(self, info: RunInfo) -> bool:
        """True if this process's worker runs and will take the run."""
        running = self._worker_task is not None and not self._worker_task.done()
        if running and info.workflow in self.workflows and not self.worker.stopping:
            self.worker.wake.set()
            return True
        return False

    async def close(self) -> None:
        """Stop executing (runs stay resumable) and close an owned log."""
        if self._worker_task is not None:
            self.worker.stop(hand_over=False)
            self._worker_task.cancel()
            with contextlib.suppress(BaseException):
                await self._worker_task
        for _, task in list(self._active.values()):
            task.cancel()
        for _, task in list(self._active.values()):
            with contextlib.suppress(BaseException):
                await task
        if self._owns_log:
            await self.log.close()

    async def __aenter__(self) -> Self:
        self._ensure_worker()  # a runtime in use drives its runs, if it runs a worker
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
        if state.status == RunStatus.WAITING and state.interrupts and not input_interrupts(state):
            wake = min(i["due_at"] for i in state.interrupts)
            raise RunNotWaitingError(
                f"run {state.run_id!r} sleeps until {wake:%Y-%m-%d %H:%M:%S} UTC and asks no "
                "question; nothing was recorded. A worker fires its timer then."
            )
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
        wf: Workflow[Any] | None,
        run_id: str,
        events: Callable[[RunState], Sequence[EventData]],
        *,
        here: bool = True,
    ) -> None:
        """Claim the run, reload it, record ``events(state)`` and continue it
        here (or, with ``here=False``, let go of it for a worker). Without the
        workflow's code (``wf`` None) it only records."""
        epoch, deadline = await self._claim(run_id)
        try:
            reducers = wf.reducer_table if wf is not None else None
            state = await load_state(self.log, run_id, reducers=reducers)
            migration = self._migration(wf, state) if wf is not None else None
            extra = events(state)
            if state.status != RunStatus.RUNNING and not extra:
                raise RunNotWaitingError(f"run {run_id!r} is {state.status}; nothing to do")
            first: list[EventData] = [WriterClaimed(epoch, self.config.owner)]
            if migration is not None and wf is not None:
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
        await self._continue(wf, state, epoch, deadline, mode, [*first, *extra], here)

    async def _continue(
        self,
        wf: Workflow[Any] | None,
        state: RunState,
        epoch: int,
        deadline: float,
        mode: str,
        events: Sequence[EventData],
        here: bool = True,
    ) -> None:
        """As the run's claimed writer: record ``events``, then drive the run
        here, or (``here=False``) release it for a worker.

        On any failure before the run is handed to its task, the writer is
        dropped and the lease released, so a corrected call can claim at once.
        """
        writer = None
        try:
            writer = RunWriter(
                self.log,
                state,
                epoch=epoch,
                durability=mode if here else "sync",  # a request is durable when recorded
                snapshots=self.config.snapshots,
                lease_deadline=deadline,
                reducers=wf.reducer_table if wf is not None else None,
            )
            for data in events:
                writer.emit(data)
            await writer.flush()
            if not here:
                await writer.close()
        except BaseException:
            if writer is not None:
                writer.abandon()
            await self._release(state.run_id, epoch)
            raise
        if here and wf is not None:
            self._launch(wf, writer)
        else:
            await self._release(state.run_id, epoch)
            self.worker.wake.set()  # this process's worker, if it runs, takes it at once

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
