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

``Runtime`` is the public face, composed of three parts it wires together:
a :class:`~agentlog.runtime._driver.RunDriver` claims runs, records their
input events and drives them; :class:`~agentlog.runtime._requests.RunRequests`
turns each request (start, resume, retry, cancel, fork, shred) into a run's
input events, through the driver; a :class:`~agentlog.runtime._worker.Worker`
takes the runs that need a driver, through the same driver. Waiting for and
reading runs, and the background worker's task, are here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import timedelta
from types import TracebackType
from typing import Any, Self

from typing_extensions import TypeVar

from agentlog.crypto import KeyStore
from agentlog.errors import ConfigError
from agentlog.eventlog._base import EventLog
from agentlog.eventlog._urls import DEFAULT_LOG_URL, open_log
from agentlog.projector._state import RunState
from agentlog.runtime._archived import ArchiveSource, open_archive_source
from agentlog.runtime._child_host import RuntimeChildHost
from agentlog.runtime._config import VERBS, RuntimeConfig
from agentlog.runtime._driver import RunDriver
from agentlog.runtime._executor import RunExecutor
from agentlog.runtime._handles import PendingInterrupt, RecoveryReport, RunHandle
from agentlog.runtime._messages import NO_DEFAULT, get_event, send_message
from agentlog.runtime._requests import RunRequests
from agentlog.runtime._shred import ShredReport
from agentlog.runtime._stream import StreamMode, StreamUntil, StreamUpdate
from agentlog.runtime._waiting import follow, pending_of, values_of
from agentlog.runtime._worker import Worker
from agentlog.runtime._workflow import Workflow
from agentlog.runtime._writer import Durability

#: A run's input type: ``Workflow(input=...)``'s TypedDict, else a dict of state keys.
In = TypeVar("In", bound=Mapping[str, Any], default=dict[str, Any])

__all__ = ["VERBS", "Runtime", "RuntimeConfig"]


class Runtime:
    """Runs workflows durably on an :class:`EventLog`.

    Args:
        event_log: where runs are recorded.
        workflows: the workflow code this process can run, by name.
        config: owner, lease, default durability, snapshot policy.
        archive: where runs archived and pruned from ``event_log`` are read
            (an archive URL, ``file://DIR`` or ``s3://BUCKET/PREFIX``, or an
            open store): ``start`` of such a run id returns the archived run,
            and ``wait``, ``result``, ``get_state`` and ``fork`` read it.

    Raises:
        ArchiveConfigError: ``archive`` is not a supported archive URL.
    """

    def __init__(
        self,
        log: EventLog,
        *,
        workflows: Iterable[Workflow[Any, Any]] = (),
        config: RuntimeConfig | None = None,
        archive: ArchiveSource | None = None,
    ) -> None:
        self.archive = None if archive is None else open_archive_source(archive)
        self.log = log
        self.config = config or RuntimeConfig()
        #: Claims, records and drives this process's runs.
        self.driver = RunDriver(log, self.config)
        #: The workflow code this process can run, by name (the driver's).
        self.workflows: dict[str, Workflow[Any, Any]] = self.driver.workflows
        self.requests = RunRequests(
            self.driver, self.archive, ensure_worker=self._ensure_worker, wait=self.wait
        )
        self.driver.children = RuntimeChildHost(self.driver, self.requests)
        self.worker = Worker(self.driver, log, self.config.worker_config, submit=self._submit_tick)
        self._owns_log = False
        self.register(*workflows)

    @classmethod
    async def open(
        cls,
        url: str = DEFAULT_LOG_URL,
        *,
        workflows: Iterable[Workflow[Any, Any]] = (),
        config: RuntimeConfig | None = None,
        keys: KeyStore | None = None,
        archive: ArchiveSource | None = None,
    ) -> Runtime:
        """A runtime on the log at ``url`` (closed with the runtime).

        ``keys``: encrypt payloads at rest with per-run data keys from this
        key store (see :func:`~agentlog.eventlog._urls.open_log`).
        ``archive``: where runs archived and pruned from the log are read
        (see :class:`Runtime`).
        """
        archive = None if archive is None else open_archive_source(archive)  # checked first
        log = await open_log(url, keys=keys)
        runtime = cls(log, workflows=workflows, config=config, archive=archive)
        runtime._owns_log = True
        return runtime

    def register(self, *workflows: Workflow[Any, Any]) -> None:
        """Make workflows runnable here (validates their graphs)."""
        self.driver.register(*workflows)

    @property
    def active_runs(self) -> Mapping[str, RunExecutor]:
        """The runs this process drives right now, by run id."""
        return self.driver.active_runs

    def active_count(self, workflow: str) -> int:
        """How many runs of ``workflow`` this process drives right now."""
        return self.driver.active_count(workflow)

    async def fire_timers(self, wf: Workflow[Any, Any], run_id: str) -> None:
        """Record TimerFired for the run's due timers and drive it here, as a
        worker does at their due time (see :meth:`RunDriver.fire_timers
        <agentlog.runtime._driver.RunDriver.fire_timers>`)."""
        await self.driver.fire_timers(wf, run_id)

    # -- the calls ------------------------------------------------------------

    async def start(
        self,
        workflow: Workflow[Any, In] | str,
        *,
        run_id: str,
        input: In | None = None,
        durability: Durability | None = None,
        max_steps: int | None = None,
        priority: int | None = None,
    ) -> RunHandle:
        """Start a run, or return the existing run with this id.

        Starting is idempotent on ``run_id``: an existing run is returned as it
        is (and continued here if it is running with no live writer). A run
        archived and pruned from the log is returned too, read through this
        runtime's ``archive``; it is never started again.

        Everything is checked before the run id is claimed, so a call with bad
        arguments leaves nothing behind and a corrected call works at once.

        Raises:
            ConfigError: a bad run id, input, durability, max_steps or priority.
            NotSerializableError: the input cannot be stored.
            RunExistsError: the run id belongs to a run of another workflow.
            UnknownWorkflowError: ``workflow`` is a name not registered here.
            LeaseHeldError: another process is starting this run id right now
                and has recorded nothing yet; retry after its lease.
            RunArchivedError: the run id is an archived run that this runtime
                cannot read: open it with ``archive=URL``. Nothing is recorded.
        """
        args = (workflow, run_id, input, durability, max_steps)
        await self.requests.start(*args, self.config.execute, priority=priority)
        return RunHandle(self, run_id)

    async def submit(
        self,
        workflow: Workflow[Any, In] | str,
        *,
        run_id: str,
        input: In | None = None,
        durability: Durability | None = None,
        max_steps: int | None = None,
        priority: int | None = None,
    ) -> RunHandle:
        """Record a new run for a worker to drive; do not execute it here.

        Like :meth:`start`: idempotent on ``run_id``, all checked first. The
        run is durable when this returns: a worker (this process's, with
        ``RuntimeConfig(worker=True)``, or ``agentlog worker``) takes it.

        Raises:
            The errors of :meth:`start`.
        """
        args = (workflow, run_id, input, durability, max_steps)
        await self.requests.start(*args, False, priority=priority)
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
            LeaseHeldError: another process is resuming or cancelling it right
                now (a cancel that took the run first makes it RunNotWaitingError).
                Nothing is recorded.
        """
        await self.requests.resume(run_id, value, answers)
        return RunHandle(self, run_id)

    async def send(
        self,
        run_id: str,
        topic: str,
        value: Any = None,
        idempotency_key: str | None = None,
        *,
        timeout: float | timedelta | None = None,  # noqa: ASYNC109
    ) -> bool:
        """Send a message into the run, for a step's ``ctx.recv(topic)``: an event
        of the run, kept in order per topic (also when sent before the run waits)
        and received once. Recorded by the run's writer: at once if none holds
        the run, at the next superstep boundary if this process drives it; if
        another does, stored in the run's mailbox (SQLite, PostgreSQL, Redis).

        Args:
            idempotency_key: a key already recorded for the run records nothing.
            timeout: the wait for a writer that is parking (on memory: any).

        Returns:
            True once per key, also when sends of it overlap, or a send of it raised
            (its retry). False: the key was sent before (also once the run ended).

        Raises:
            UnknownRunError, RunEndedError, InvalidMessageError, NotSerializableError,
            LeaseHeldError (``timeout`` passed; the message may be stored: retry it
            with its key), BackendUnavailableError (Kafka; docs/messages.md).
        """
        self._ensure_worker()
        read = self.requests.read_state
        return await send_message(self.driver, read, run_id, topic, value, idempotency_key, timeout)

    async def get_event(
        self,
        run_id: str,
        key: str,
        *,
        timeout: float | timedelta | None = None,  # noqa: ASYNC109
        default: Any = NO_DEFAULT,
    ) -> Any:
        """The latest value the run published under ``key`` (a published None
        too), waiting up to ``timeout`` (None: no bound). If that passes, or the
        run ended without ``key``: ``default`` if given, else raises
        EventNotPublishedError (``.ended``); UnknownRunError, InvalidMessageError."""
        return await get_event(self.driver, self.requests.read_state, run_id, key, timeout, default)

    async def fork(
        self,
        run_id: str,
        at_seq: int,
        *,
        new_run_id: str,
        updates: Mapping[str, Any] | None = None,
        archive: ArchiveSource | None = None,
    ) -> RunHandle:
        """Start ``new_run_id`` from run ``run_id``'s state at ``at_seq``, and drive it here.

        The new run reuses the origin's recorded task results up to that seq
        (those tasks do not run again), then goes on under the workflow code
        registered now, as a run resumed after a crash at that seq would.
        ``updates`` are reduced into the state at the fork point, like a
        step's writes. The new run records where it came from
        (``RunForked``; ``RunState.forked_from``); the origin is not changed.
        See :mod:`agentlog.runtime._fork`.

        Args:
            run_id: the origin run.
            at_seq: the origin's seq to fork at (its state after that event).
            new_run_id: the run to create.
            updates: state keys to values, applied at the fork point.
            archive: an archive URL or store to read the origin from when its
                events were archived and pruned from this log (default: the
                runtime's own ``archive``).

        Raises:
            UnknownRunError: no such origin (RunArchivedError: pass ``archive``).
            ConfigError: ``at_seq`` out of range, a bad new run id or ``updates``.
            RunExistsError: ``new_run_id`` exists.
            ShreddedError: the origin was shredded.
            UnknownWorkflowError: the origin's workflow is not registered here.
            VersionMismatchError: the origin was recorded under other code
                and no migration is registered.
            Nothing is recorded when any of these is raised.
        """
        await self.requests.fork(run_id, at_seq, new_run_id, updates, archive)
        return RunHandle(self, new_run_id)

    async def pending(self, run_id: str) -> list[PendingInterrupt]:
        """The run's open interrupts, oldest first (empty unless it is waiting).

        Raises:
            UnknownRunError: no such run.
        """
        return pending_of(await self.get_state(run_id))

    async def retry(self, run_id: str, reason: str = "retried by request") -> RunHandle:
        """Continue a failed run under the same run id, here.

        The run goes on from its last committed superstep: branches whose
        writes are recorded keep them, recorded task results are returned
        without running the effects again, and the other branches run with
        fresh attempts, as does each failed task: its retry policy's
        ``max_attempts`` more, no more (RunRetried is recorded).

        Raises:
            UnknownRunError: no such run.
            RunNotFailedError: the run has not failed (see :data:`VERBS`).
            VersionMismatchError: the run was recorded under other code.
            LeaseHeldError: another process is retrying or cancelling it right
                now (a cancel that took the run first makes it RunNotFailedError).
                Nothing is recorded.
        """
        await self.requests.retry(run_id, reason)
        return RunHandle(self, run_id)

    async def cancel(self, run_id: str, reason: str = "cancelled by request") -> RunState:
        """Cancel the run; return its final state (``cancelled``).

        A run executing here is interrupted at once: its running steps and
        task calls are cancelled (a sync task's thread cannot be stopped; it
        is no longer awaited); ``result`` raises ``RunCancelledError``. A run
        parked or executing elsewhere is taken over (which fences its writer)
        and cancelled. Cancelling a finished run changes nothing. While the
        cancel is being recorded it holds the run's lease, so a ``resume`` or
        ``retry`` racing it is refused (``LeaseHeldError``, or
        ``RunNotWaitingError`` once the run is cancelled) instead of fencing it.

        Raises:
            UnknownRunError: no such run.
            LeaseHeldError: other forced claims (cancels, shreds) kept taking
                the run before this cancel was recorded, and it has not ended.
        """
        return await self.requests.cancel(run_id, reason)

    async def shred(self, run_id: str) -> ShredReport:
        """Crypto-shred the run: destroy its data key and record that it was done.

        A run that has not ended is cancelled first (its writer, here or in
        another process, is fenced). Afterwards every copy of its content is
        unreadable (``get_state``, resume and replay raise ShreddedError), while
        its metadata still lists, counts and audits, with status ``shredded``.
        A run archived and pruned from the log is shredded through this
        runtime's ``archive`` (its Parquet files are not rewritten: the key
        that opened their content is gone). Its forks are runs of their own,
        sealed under their own keys: they are not shredded with it. Shredding
        a shredded run records nothing. See :mod:`agentlog.runtime._shred`.

        Raises:
            UnknownRunError: no such run.
            RunArchivedError: the run was archived and pruned, and this runtime
                has no ``archive`` (``Runtime.open(url, archive=URL)``).
            NoKeyStoreError: this runtime's log has no key store (``keys=``).
            NotEncryptedError: the run was recorded in clear; nothing changed.
            MissingDataKeyError, WrongKeyError: another key store encrypted it.
        """
        return await self.requests.shred(run_id)

    async def wait(self, run_id: str, *, timeout: float | None = None) -> RunState:  # noqa: ASYNC109
        """Wait until the run ends or parks on an interrupt a human answers;
        return its state.

        A run that sleeps on a timer is not parked for a human: ``wait`` goes
        on while a worker fires the timer. A run executing in this process is
        awaited; one executing elsewhere is followed through the log; one
        archived and pruned from the log is read from the runtime's archive.

        Args:
            timeout: seconds to wait at most (None: no bound).

        Raises:
            NoLiveWriterError: the run needs a driver (it is running, or its
                timer is due) and no live worker took it within
                ``RuntimeConfig.orphan_grace_seconds``: start a worker
                (``agentlog worker``) or ``recover()`` it here.
            RunFailedError: a step's code broke the workflow's contract (it
                returned a tuple, wrote an undeclared key, gave an interrupt a
                bad ``expects``...): the run is recorded failed, naming the
                step and the error, whichever process drove it.
            TimeoutError: ``timeout`` passed first; the run is unharmed.
            RunArchivedError: the run was archived and pruned, and this
                runtime has no ``archive`` that holds it.
            Whatever stopped this process's writer (FencedError, a value that
            cannot be serialized).
        """
        self._ensure_worker()
        async with asyncio.timeout(timeout):
            read, will_take = self.requests.read_state, self.worker.will_take
            return await follow(self.driver, read, will_take, run_id)

    def stream(
        self,
        run_id: str,
        mode: StreamMode = "updates",
        *,
        after_seq: int = 0,
        until: StreamUntil = "end",
    ) -> AsyncIterator[StreamUpdate]:
        """Follow the run live, from any process: ``async for update in
        rt.stream(run_id, mode="values")``; see :func:`agentlog.runtime._stream.stream`."""
        return RunHandle(self, run_id).stream(mode, after_seq=after_seq, until=until)

    async def get_state(self, run_id: str) -> RunState:
        """The run's state now: this process's live state if it drives the run,
        else the state folded from the log (or from the runtime's archive, for a
        run archived and pruned from the log). A copy: changing it changes nothing.

        Raises:
            UnknownRunError: no such run (RunArchivedError: archived, and this
                runtime has no ``archive`` that holds it).
        """
        active = self.driver.active_run(run_id)
        if active is not None:
            return active.state.copy()
        return await self.requests.read_state(run_id)

    async def result(self, run_id: str, *, timeout: float | None = None) -> dict[str, Any]:  # noqa: ASYNC109
        """The final state values of a completed run.

        Raises:
            RunFailedError: the run failed; or, caused by it, the failure's
                own class where it is rebuilt safely (``_failures.ended_error``).
            RunCancelledError: the run was cancelled.
            WorkflowError: the run is waiting on an interrupt.
        """
        state = await self.wait(run_id, timeout=timeout)
        return values_of(state, self.workflows.get(state.workflow))

    async def recover(self) -> RecoveryReport:
        """Take over every running run whose writer's lease expired.

        One bad run never blocks the others: each run that cannot be taken
        over (an unregistered workflow, changed code, a corrupt event) is
        reported with its typed error, and the rest are recovered. Runs a live
        lease holds are listed (``held``); a LangGraph thread's app drives it.
        """
        return await self.driver.recover()

    # -- the worker ---------------------------------------------------------------

    async def serve(self) -> None:
        """Run this process's worker in the foreground until ``worker.stop()``
        (``agentlog worker`` calls it and stops it on SIGTERM), then hand every
        run over: each finishes its current superstep and is released."""
        if self.worker.in_background:
            raise ConfigError("this runtime's worker already runs (in the background)")
        await self.worker.run()

    async def close(self) -> None:
        """Stop executing (runs stay resumable) and close an owned log."""
        await self.worker.close()
        await self.driver.cancel_all()
        if self._owns_log:
            await self.log.close()

    def _ensure_worker(self) -> None:
        """Start the background worker, once, if this runtime runs one."""
        if self.config.worker:
            self.worker.start_background()

    async def _submit_tick(self, workflow: str, run_id: str, input: dict[str, Any] | None) -> None:
        """How the worker submits a schedule tick's run: as any client's request."""
        await self.submit(workflow, run_id=run_id, input=input)

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
