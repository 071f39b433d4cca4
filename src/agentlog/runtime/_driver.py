"""How a runtime drives runs: claim, record, continue, heartbeat, release.

:class:`RunDriver` owns the runs this process drives: it claims a run's
writer lease, records what was asked for (a start, an answer, a retry, a
timer that fired, a client's command), runs the run's supersteps in a task
while a heartbeat renews the lease, and lets go. The requests
(:class:`~agentlog.runtime._requests.RunRequests`) and the worker
(:class:`~agentlog.runtime._worker.Worker`) both hold the one driver of their
runtime and go through it, so a run is always driven the same way; the
driver knows neither of them. When it lets go of a run for a worker it sets
:attr:`RunDriver.wake`, the event the worker of the same runtime waits on.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from agentlog._logging import get_logger
from agentlog.errors import (
    AgentlogError,
    FencedError,
    LeaseHeldError,
    RunNotWaitingError,
    UnknownRunError,
    UnknownWorkflowError,
    VersionMismatchError,
)
from agentlog.eventlog._base import Command, EventLog
from agentlog.eventlog._queue_slots import QueueSlots
from agentlog.eventlog.events import (
    LANGGRAPH_WORKFLOW,
    EventData,
    RunAdmitted,
    RunMigrated,
    RunStarted,
    RunStatus,
    TimerFired,
    WriterClaimed,
    utcnow,
)
from agentlog.projector._snapshots import load_state
from agentlog.projector._state import RunState, due_timers
from agentlog.runtime._cancelling import task_cancelling
from agentlog.runtime._children import CHILD_HOST, ChildHost
from agentlog.runtime._config import RuntimeConfig
from agentlog.runtime._executor import RunExecutor
from agentlog.runtime._handles import RecoveryReport
from agentlog.runtime._queue_admission import admit
from agentlog.runtime._queue_slots import SlotKeeper
from agentlog.runtime._queues import Queue, check_queue
from agentlog.runtime._telemetry import TELEMETRY, choose
from agentlog.runtime._workflow import Migration, Workflow
from agentlog.runtime._writer import RunWriter

__all__ = ["RunDriver"]

_log = get_logger("agentlog.runtime")

#: In-doubt keyed send commands kept per process (:meth:`RunDriver.keep_unheard_command`).
_UNHEARD_KEPT = 10_000

#: What a driver records that is not an input from outside the run.
_NOT_INPUTS = (WriterClaimed, RunMigrated)


class RunDriver:
    """Claims and drives the runs of one runtime's workflows, in this process.

    Args:
        event_log: where the runs are recorded.
        config: owner, lease, durability and snapshots of the runs' writers.
    """

    def __init__(self, log: EventLog, config: RuntimeConfig) -> None:
        self.log = log
        self.config = config
        #: The workflow code this process can run, by name.
        self.workflows: dict[str, Workflow[Any, Any]] = {}
        #: Set when a run is let go of for a worker, or needs one now: the
        #: worker of the same runtime waits on it.
        self.wake = asyncio.Event()
        self._active: dict[str, tuple[RunExecutor, asyncio.Task[RunState]]] = {}
        #: Runs this process is claiming right now (until launched or released).
        self._claiming: set[str] = set()
        #: Sends cancelled after their executor here took the message, by
        #: (run, key): the next send of the key reports it (runtime/_messages.py).
        self.unheard: dict[tuple[str, str], asyncio.Future[bool]] = {}
        #: Keyed ``send`` commands whose outcome did not come in time, by
        #: (run, key), the oldest first (runtime/_messages.py, Kafka).
        self.unheard_commands: OrderedDict[tuple[str, str], Command] = OrderedDict()
        #: Starts and reads child runs for steps; told when a run ends (the runtime's).
        self.children: ChildHost | None = None
        #: Traces and metrics of the runs driven here (runtime/_telemetry.py).
        self.telemetry = choose(config.telemetry)
        #: Queue slots granted by each queue's admitter (Kafka: runtime/_queue_slots.py).
        self.slots: SlotKeeper | None = None
        if not log.direct_writes and isinstance(log, QueueSlots):
            self.slots = SlotKeeper(log, config.lease_seconds)

    def keep_unheard_command(self, run_id: str, key: str, command: Command) -> None:
        """Keep ``command`` as the in-doubt send of ``key`` (the first one
        kept stays), at most ``_UNHEARD_KEPT`` of them (the oldest let go)."""
        self.unheard_commands.setdefault((run_id, key), command)
        while len(self.unheard_commands) > _UNHEARD_KEPT:
            self.unheard_commands.popitem(last=False)

    def register(self, *workflows: Workflow[Any, Any]) -> None:
        """Make workflows runnable here (validates their graphs)."""
        for workflow in workflows:
            workflow.validate()
            check_queue(self.log, workflow, self.workflows.values())
            self.workflows[workflow.name] = workflow

    @property
    def queues(self) -> dict[str, tuple[Queue, list[str]]]:
        """Each queue of the workflows registered here, with their names."""
        found: dict[str, tuple[Queue, list[str]]] = {}
        for wf in self.workflows.values():
            if wf.queue is not None:
                found.setdefault(wf.queue.name, (wf.queue, []))[1].append(wf.name)
        return found

    @property
    def queue_of(self) -> dict[str, str]:
        """The queue's name of each queued workflow registered here."""
        return {wf.name: wf.queue.name for wf in self.workflows.values() if wf.queue}

    @property
    def active_runs(self) -> Mapping[str, RunExecutor]:
        """The runs this process drives right now, by run id."""
        return {run_id: active[0] for run_id, active in self._active.items()}

    def active_run(self, run_id: str) -> RunExecutor | None:
        """The executor driving ``run_id`` in this process, if one does."""
        active = self._active.get(run_id)
        return None if active is None else active[0]

    def active_task(self, run_id: str) -> asyncio.Task[RunState] | None:
        """The task driving ``run_id`` in this process, if one does."""
        active = self._active.get(run_id)
        return None if active is None else active[1]

    def active_count(self, workflow: str) -> int:
        """How many runs of ``workflow`` this process drives right now."""
        return sum(1 for ex, _ in self._active.values() if ex.workflow.name == workflow)

    async def take_over(self, wf: Workflow[Any, Any], run_id: str, *, lapsed: bool = False) -> None:
        """Claim a running run that no live writer holds and drive it here
        (``lapsed``: its last writer's lease ran out, it did not let go).

        Raises:
            LeaseHeldError: another writer holds it.
            RunNotWaitingError: it is not running any more.
        """

        def nothing_new(state: RunState) -> list[EventData]:
            if lapsed:
                self.telemetry.taken_over(state, self.config.owner)
            return []

        await self.take_over_with(wf, run_id, nothing_new)

    async def record(
        self,
        run_id: str,
        events: Callable[[RunState], Sequence[EventData]],
        *,
        start: RunStarted | None = None,
    ) -> None:
        """As the run's owner: record ``events(state)`` (or ``start``, a new
        run) durably, then drive the run here if its workflow is registered;
        else leave it recorded for a worker that knows the workflow.

        The request is written with a sync write whatever the run's
        durability mode (an ``exit`` run would hold it until it parks): it
        is what a client's command asked for, and on Kafka that append
        commits the command's offset, so it must be on record first.

        Raises:
            LeaseHeldError: another writer holds the run.
            RunNotWaitingError: ``events`` gave nothing to record.
        """
        if start is not None:
            wf = self.workflows.get(start.workflow)
            epoch, deadline = await self.claim(run_id)
            await self.continue_run(
                wf, RunState(run_id=run_id), epoch, deadline, start.durability, [start], False
            )
        else:
            wf = self.workflows.get((await self.log.get_run(run_id)).workflow)
            await self.take_over_with(wf, run_id, events, here=False)
        if wf is not None:  # recorded: now drive it, in its own durability mode
            with contextlib.suppress(LeaseHeldError, RunNotWaitingError):
                await self.take_over(wf, run_id)

    async def fire_timers(self, wf: Workflow[Any, Any], run_id: str) -> None:
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

        await self.take_over_with(wf, run_id, events)

    async def recover(self) -> RecoveryReport:
        """Take over every running run whose writer's lease expired
        (:meth:`Runtime.recover <agentlog.runtime._runtime.Runtime.recover>`)."""
        report = RecoveryReport()
        for info in await self.log.list_runs(status=RunStatus.RUNNING):
            if info.run_id in self._active or info.workflow == LANGGRAPH_WORKFLOW:
                continue
            if info.lease_live(utcnow()):
                report.held.append(info)
                continue
            try:
                wf = self.workflow(info.workflow)
                await self.take_over(wf, info.run_id, lapsed=info.lease_expires_at is not None)
            except (LeaseHeldError, RunNotWaitingError):
                continue  # another process got there first, or it just ended
            except AgentlogError as exc:
                _log.warning("run not recovered", run_id=info.run_id, error=str(exc))
                report.failed[info.run_id] = exc
                continue
            report.recovered.append(info.run_id)
        return report

    async def hand_over(self) -> None:
        """Let every run driven here finish its current superstep, record it,
        and release its lease, so that another worker continues it at once."""
        for executor, _ in list(self._active.values()):
            executor.hand_over_requested.set()
        for _, task in list(self._active.values()):
            with contextlib.suppress(BaseException):
                await task

    async def cancel_all(self) -> None:
        """Cancel every run driven here (they stay resumable) and wait for them."""
        for _, task in list(self._active.values()):
            task.cancel()
        for _, task in list(self._active.values()):
            with contextlib.suppress(BaseException):
                await task

    def workflow(self, name: str) -> Workflow[Any, Any]:
        """The registered workflow ``name``.

        Raises:
            UnknownWorkflowError: none is registered here.
        """
        wf = self.workflows.get(name)
        if wf is None:
            raise UnknownWorkflowError(name, self.workflows, self.config.workflow_hint)
        return wf

    def migration(self, wf: Workflow[Any, Any], state: RunState) -> Migration | None:
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

    @staticmethod
    def migrated(wf: Workflow[Any, Any], state: RunState, migration: Migration) -> RunMigrated:
        """The event that moves ``state`` onto ``wf``'s version through ``migration``."""
        values = migration(dict(state.values))
        return RunMigrated(state.version, wf.version, wf.fingerprint, dict(wf.reducers), values)

    async def claim(self, run_id: str) -> tuple[int, float]:
        """Claim the run; return the epoch and when the lease ends by our clock.

        One claim per run at a time in this process: the background worker
        and a caller's ``start`` must not race each other for the same run
        (on Kafka's per-run producers they would fence each other). The mark
        lasts until the run is launched here or its lease is released.
        """
        if run_id in self._claiming or run_id in self._active:
            raise LeaseHeldError(run_id, self.config.owner, self.config.lease_seconds)
        self._claiming.add(run_id)
        asked_at = time.monotonic()  # the lease counts from no later than this
        try:
            epoch = await self.log.claim_writer(
                run_id,
                owner=self.config.owner,
                lease_seconds=self.config.lease_seconds,
                force=False,
            )
        except BaseException:
            self._claiming.discard(run_id)
            raise
        return epoch, asked_at + self.config.lease_seconds

    @contextlib.asynccontextmanager
    async def claimed(self, run_id: str) -> AsyncIterator[tuple[int, float]]:
        """Claim the run (its epoch and lease deadline, as :meth:`claim`) for
        a block that prepares what to record; if the block fails, release the
        lease, so a corrected call can claim at once."""
        epoch, deadline = await self.claim(run_id)
        try:
            yield epoch, deadline
        except BaseException:
            await self.release(run_id, epoch)
            raise

    async def take_over_with(
        self,
        wf: Workflow[Any, Any] | None,
        run_id: str,
        events: Callable[[RunState], Sequence[EventData]],
        *,
        here: bool = True,
    ) -> None:
        """Claim the run, reload it, record ``events(state)`` and continue it
        here (or, with ``here=False``, let go of it for a worker). Without the
        workflow's code (``wf`` None) it only records."""
        async with self.claimed(run_id) as (epoch, deadline):
            reducers = wf.reducer_table if wf is not None else None
            state = await load_state(self.log, run_id, reducers=reducers)
            migration = self.migration(wf, state) if wf is not None else None
            extra = events(state)
            if state.status != RunStatus.RUNNING and not extra:
                raise RunNotWaitingError(f"run {run_id!r} is {state.status}; nothing to do")
            first: list[EventData] = [WriterClaimed(epoch, self.config.owner)]
            if migration is not None and wf is not None:
                first.append(self.migrated(wf, state, migration))
        mode = state.durability or self.config.durability
        await self.continue_run(wf, state, epoch, deadline, mode, [*first, *extra], here)

    async def continue_run(
        self,
        wf: Workflow[Any, Any] | None,
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
            if here and wf is not None and wf.queue is not None:
                # A queued run is driven only if its queue admits it; else recorded
                # and left queued. A first admission is on record before it acts.
                admitted = state.seq > 0 and await self.admit(wf.queue, state.run_id, epoch)
                here = admitted is not False
                events = [*events, admitted] if isinstance(admitted, RunAdmitted) else events
            writer = RunWriter(
                self.log,
                state,
                epoch=epoch,
                durability=mode if here else "sync",  # a request is durable when recorded
                snapshots=self.config.snapshots,
                lease_deadline=deadline,
                reducers=wf.reducer_table if wf is not None else None,
            )
            writer.observe = self.telemetry.recorded
            for data in events:
                at = self.slots.granted_at(state.run_id) if self.slots else None
                writer.emit(data, at=at if isinstance(data, RunAdmitted) else None)
            if any(not isinstance(data, _NOT_INPUTS) for data in events):
                await writer.persist()  # an input is on record before the run acts on it
            else:
                await writer.flush()
            if not here:
                await writer.close()
        except BaseException:
            if writer is not None:
                writer.abandon()
            if self.slots is not None:  # before the lease: a claim after it asks anew
                await self.slots.release(state.run_id)
            await self.release(state.run_id, epoch)
            raise
        if here and wf is not None:
            self._launch(wf, writer)
        else:
            await self.release(state.run_id, epoch)
            self.wake.set()  # this process's worker, if it runs, takes it at once

    async def admit(self, queue: Queue, run_id: str, epoch: int) -> RunAdmitted | bool:
        """May ``run_id``, claimed here, be driven now? See :func:`admit` (or,
        on Kafka, :class:`~agentlog.runtime._queue_slots.SlotKeeper`)."""
        if self.slots is not None:
            info = await self.log.get_run(run_id)
            admitted = info.admitted_at is not None
            return await self.slots.ask(
                queue, run_id, admitted, info.priority, info.started_at, epoch
            )
        return await admit(self.log, queue, self.queues[queue.name][1], run_id)

    def _launch(self, wf: Workflow[Any, Any], writer: RunWriter) -> None:
        executor = RunExecutor(writer, wf)
        run_id = writer.state.run_id
        task = asyncio.create_task(self._drive(executor, writer), name=f"agentlog run {run_id}")
        self._active[run_id] = (executor, task)
        self._claiming.discard(run_id)
        task.add_done_callback(lambda done: self._ended(run_id, done))

    def _ended(self, run_id: str, task: asyncio.Task[RunState]) -> None:
        """The run's task ended: forget it, and read how it ended. A caller of
        ``wait`` may read it too; a run a worker drives has no other reader,
        and asyncio would log its error as "never retrieved"."""
        self._active.pop(run_id, None)
        if not task.cancelled() and (error := task.exception()) is not None:
            _log.info("run stopped in this process", run_id=run_id, error=repr(error))

    async def _drive(self, executor: RunExecutor, writer: RunWriter) -> RunState:
        run_id, epoch = writer.state.run_id, writer.epoch
        fenced: list[FencedError] = []
        heartbeat = asyncio.create_task(self._heartbeat(writer, asyncio.current_task(), fenced))
        CHILD_HOST.set(self.children)  # this run's task only: its steps start children
        TELEMETRY.set(self.telemetry)  # and its steps and tasks report here
        try:
            state = await self.telemetry.run(executor.run(), writer.state, self.config.owner)
        except asyncio.CancelledError:
            if fenced:  # the heartbeat found a newer writer: say so, not "cancelled"
                raise fenced[0] from None
            raise
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            if self.slots is not None:  # before the lease: a claim after it asks anew
                await self.slots.release(run_id)
            await self.release(run_id, epoch)
        if self.children is not None and state.is_terminal:
            await self.children.run_ended(state)  # wake a parent, cancel children
        return state

    async def _heartbeat(
        self,
        writer: RunWriter,
        owner: asyncio.Task[Any] | None,
        fenced: list[FencedError],
    ) -> None:
        run_id, epoch, lease = writer.state.run_id, writer.epoch, self.config.lease_seconds
        # A cancel swallowed by a client library mid-renewal must still end
        # the loop, or the run's driver waits for it while it keeps the lease.
        while not task_cancelling():
            await asyncio.sleep(lease / 3)
            sent_at = time.monotonic()
            try:
                await self.log.renew_lease(run_id, epoch, lease)
                if self.slots is not None:  # sent after sent_at: it lasts past our deadline
                    await self.slots.renew(run_id, epoch)
            except FencedError as exc:
                _log.warning("writer fenced; stopping", run_id=run_id, epoch=epoch)
                writer.fence(exc)  # no side effect may start from here on
                fenced.append(exc)
                if owner is not None:
                    owner.cancel()
                return
            except Exception as exc:  # storage hiccup: the next renewal may work
                if task_cancelling():
                    return  # it was our cancel, swallowed by the client
                _log.warning("lease renewal failed", run_id=run_id, error=str(exc))
            else:
                writer.lease_renewed(sent_at, lease)
                self.telemetry.lease_renewed(writer.state, self.config.owner)

    async def release(self, run_id: str, epoch: int) -> None:
        """Let go of the run's lease (and of this process's claim on it)."""
        self._claiming.discard(run_id)
        with contextlib.suppress(FencedError, UnknownRunError):
            await self.log.release_lease(run_id, epoch)
