"""How a runtime carries out a caller's request: start, resume, retry, cancel, fork, shred.

:class:`RunRequests` turns a call of :class:`~agentlog.runtime._runtime.Runtime`
into the input events of a run. Each request is checked whole before
anything is recorded (a bad call leaves nothing behind), then takes one of
two roads:

* on a log that runtimes write directly (SQLite, memory, PostgreSQL), this
  process claims the run's writer lease, records the input and drives the
  run, through the runtime's :class:`~agentlog.runtime._driver.RunDriver`;
* on a log whose workers own the runs (Kafka with a consumer group), it
  sends the input as a :class:`~agentlog.eventlog._base.Command` and the
  run's owner records it (:mod:`agentlog.runtime._commands`).

The public calls, with their documentation, are on ``Runtime``; they hand
their arguments here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from agentlog._logging import get_logger
from agentlog.errors import (
    BackendUnavailableError,
    ConfigError,
    FencedError,
    LeaseHeldError,
    RunExistsError,
    RunNotFailedError,
    RunNotWaitingError,
    WorkflowError,
)
from agentlog.eventlog._base import Command, check_run_id
from agentlog.eventlog.codec import pack
from agentlog.eventlog.events import (
    EventData,
    ResumeReceived,
    RunCancelled,
    RunRetried,
    RunShredded,
    RunStarted,
    RunStatus,
    WriterClaimed,
    utcnow,
)
from agentlog.projector._fold import fold
from agentlog.projector._snapshots import load_state
from agentlog.projector._state import RunState, input_interrupts, is_message
from agentlog.runtime._archived import ArchiveSource, archive_history, read_state
from agentlog.runtime._commands import send, waits_for_outcome
from agentlog.runtime._config import verb_hint
from agentlog.runtime._driver import RunDriver
from agentlog.runtime._expects import answers_for
from agentlog.runtime._fork import claim_of_new_run, plan_fork, record_fork
from agentlog.runtime._queues import check_priority
from agentlog.runtime._shred import (
    SHRED_REASON,
    ShredReport,
    check_shreddable,
    record_shred,
    shredded_already,
)
from agentlog.runtime._workflow import Workflow, check_max_steps
from agentlog.runtime._writer import Durability, RunWriter, check_durability

__all__ = ["RunRequests"]

_log = get_logger("agentlog.runtime")

#: How many times a cancel claims the run when other forced claims keep
#: taking it before the cancel is recorded (each of those ends it, as a rule).
_CANCEL_CLAIMS = 3


def _check_run_id(run_id: str) -> None:
    if not run_id:
        raise ConfigError(
            f"start() needs an explicit, stable run_id (non-empty text), got {run_id!r}"
        )
    check_run_id(run_id)


def _require_waiting(state: RunState) -> None:
    asked = input_interrupts(state)
    topics = sorted(
        {str((i.get("payload") or {}).get("topic")) for i in state.interrupts if is_message(i)}
    )
    if state.status == RunStatus.WAITING and topics and not asked:
        raise RunNotWaitingError(
            f"run {state.run_id!r} waits for a message on {topics} and asks no "
            "question; nothing was recorded. Send it with Runtime.send or `agentlog send`."
        )
    if state.status == RunStatus.WAITING and state.interrupts and not asked:
        wake = min(i["due_at"] for i in state.interrupts)
        raise RunNotWaitingError(
            f"run {state.run_id!r} sleeps until {wake:%Y-%m-%d %H:%M:%S} UTC and asks no "
            "question; nothing was recorded. A worker fires its timer then."
        )
    if state.status != RunStatus.WAITING or not state.interrupts:
        raise _refused(RunNotWaitingError, state, "waiting on an interrupt")


def _require_failed(state: RunState) -> None:
    if state.status != RunStatus.FAILED:
        raise _refused(RunNotFailedError, state, "failed")


def _refused(error: type[WorkflowError], state: RunState, wanted: str) -> WorkflowError:
    """The error for a request the run's status refuses, with the verb that fits it."""
    return error(
        f"run {state.run_id!r} is {state.status}, not {wanted}; nothing was recorded. "
        f"{verb_hint(state.status)}"
    )


class RunRequests:
    """The requests a caller makes of a run, carried out through ``driver``.

    Args:
        driver: claims, records and drives the runs of this process.
        archive: where runs archived and pruned from the log are read (None: nowhere).
        ensure_worker: starts the runtime's background worker, if it runs one
            (called once a request is checked, before it moves a run).
        wait: the runtime's :meth:`Runtime.wait`, for a cancel of a run
            driven here (its running superstep is interrupted).
    """

    def __init__(
        self,
        driver: RunDriver,
        archive: ArchiveSource | None,
        *,
        ensure_worker: Callable[[], None],
        wait: Callable[[str], Awaitable[RunState]],
    ) -> None:
        self._driver = driver
        self.log, self.config = driver.log, driver.config
        self.archive = archive
        self._ensure_worker = ensure_worker
        self._wait = wait

    async def read_state(self, run_id: str) -> RunState:
        """The run's state from the log, or from :attr:`archive` once its events
        were pruned into it (see :mod:`agentlog.runtime._archived`).

        Raises:
            UnknownRunError: no such run (RunArchivedError: archived, and this
                runtime has no archive that holds it).
        """
        return await read_state(self.log, self.archive, run_id)

    async def _send(
        self,
        command: Command,
        *,
        wait: bool = True,
        check: Callable[[RunState], None] | None = None,
    ) -> None:
        """Send a request to the run's owning worker (see :func:`commands.send
        <agentlog.runtime._commands.send>`)."""
        await send(self.log, command, wake=self._driver.wake, wait=wait, check=check)

    async def start(
        self,
        workflow: Workflow[Any, Any] | str,
        run_id: str,
        input: Mapping[str, Any] | None,
        durability: Durability | None,
        max_steps: int | None,
        here: bool,
        parent: Mapping[str, Any] | None = None,
        priority: int | None = None,
    ) -> None:
        """``Runtime.start`` (``here``: drive it in this process) and ``Runtime.submit``;
        ``parent`` links a child run to the parent's call that started it;
        ``priority`` is the run's in its workflow's queue."""
        if isinstance(workflow, Workflow):
            if self._driver.workflows.get(workflow.name) is not workflow:
                self._driver.register(workflow)
            wf = workflow
        else:
            wf = self._driver.workflow(workflow)
        _check_run_id(run_id)
        mode = durability or self.config.durability
        check_durability(mode)
        if max_steps is not None:
            check_max_steps(max_steps, ConfigError)
        rank = check_priority(wf.name, wf.queue, priority)
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
        wf.check_input(input)
        pack(input, path="input")
        self._ensure_worker()
        info = await self.log.find_run(run_id)
        if info is not None and info.last_seq > 0:
            if info.workflow != wf.name:
                raise RunExistsError(
                    f"run {run_id!r} exists and belongs to workflow {info.workflow!r}, "
                    f"not {wf.name!r}; pick another run id"
                )
            if info.archived:  # returned as it is, once we know we can read it
                await self.read_state(run_id)
            idle = self._driver.active_run(run_id) is None and info.status == RunStatus.RUNNING
            if here and idle:
                # Another writer took it first (a FencedError: a cancel's forced claim).
                with contextlib.suppress(LeaseHeldError, RunNotWaitingError, FencedError):
                    await self._driver.take_over_with(wf, run_id, lambda state: [])
            return
        started = RunStarted(
            workflow=wf.name,
            version=wf.version,
            input=dict(input or {}),
            durability=mode,
            fingerprint=wf.fingerprint,
            limits={
                "max_steps": max_steps if max_steps is not None else wf.max_steps,
                **({"parent": dict(parent)} if parent else {}),
                **self._driver.telemetry.started(run_id, wf.name),  # the run's trace
                **({"queue": {"name": wf.queue.name, "priority": rank}} if wf.queue else {}),
            },
            start=wf.start,
            reducers=dict(wf.reducers),
        )
        if not self.log.direct_writes:  # the run's owning worker records it
            # A submit returns once the start is queued; the log's reads of the
            # run wait for it (Kafka). Refused: another start went first.
            await self._send(Command(run_id, "start", started), wait=False)
            return
        # LeaseHeldError here: another writer is starting this run right now
        # and has recorded nothing yet (or died doing so, until its lease ends)
        epoch, deadline = await self._driver.claim(run_id)
        state = RunState(run_id=run_id)
        await self._driver.continue_run(wf, state, epoch, deadline, mode, [started], here)

    async def resume(self, run_id: str, value: Any, answers: Mapping[str, Any] | None) -> None:
        """``Runtime.resume``."""
        state = await self.read_state(run_id)
        _require_waiting(state)
        chosen = answers_for(state, value, answers)
        pack(chosen, path="resume value")  # refused before anything is claimed

        def still_open(current: RunState) -> None:
            _require_waiting(current)
            answers_for(current, None, chosen)  # still open, now that we own the run

        await self._request(state, "resume", ResumeReceived(answers=chosen), still_open)

    async def retry(self, run_id: str, reason: str) -> None:
        """``Runtime.retry``."""
        state = await self.read_state(run_id)
        _require_failed(state)
        await self._request(state, "retry", RunRetried(reason), _require_failed)

    async def _request(
        self, state: RunState, kind: str, data: EventData, check: Callable[[RunState], None]
    ) -> None:
        """Record ``data`` (an answer, a retry) in the run ``state`` is of, and
        continue it; or send it to the run's owning worker.

        ``state`` passed ``check`` already; it is checked again on the run's
        state once this process owns the run, as another may have gone first.
        """
        wf = self._driver.workflow(state.workflow)
        self._driver.migration(wf, state)  # fail before anything is recorded

        def events(current: RunState) -> list[EventData]:
            check(current)
            return [data]

        self._ensure_worker()
        if not self.log.direct_writes:
            await self._send(Command(state.run_id, kind, data), check=check)
            return
        try:
            await self._driver.take_over_with(wf, state.run_id, events, here=self.config.execute)
        except FencedError:
            # A forced claim (a cancel, a shred) took the run between our claim
            # and our write, so nothing of ours was recorded: say what the run
            # is now (RunNotWaitingError once it was cancelled), or who holds it.
            check(await load_state(self.log, state.run_id))
            raise await self._lease_held(state.run_id) from None

    async def fork(
        self,
        run_id: str,
        at_seq: int,
        new_run_id: str,
        updates: Mapping[str, Any] | None,
        archive: ArchiveSource | None,
    ) -> None:
        """``Runtime.fork``."""
        async with archive_history(self.log, archive or self.archive) as history:
            workflow = self._driver.workflow
            plan = await plan_fork(history, run_id, at_seq, new_run_id, updates, workflow)
        wf = plan.workflow
        origin = fold(plan.origin_events)
        migration = self._driver.migration(wf, origin)  # VersionMismatchError: nothing recorded
        if not self.log.direct_writes:
            raise ConfigError(
                f"fork needs a log that runtimes write directly ({self.log.url} sends "
                "commands to the runs' owning workers); nothing was recorded"
            )
        self._ensure_worker()
        with claim_of_new_run(new_run_id):  # lost to another claim: RunExistsError
            async with self._driver.claimed(new_run_id) as (epoch, deadline):
                state = await record_fork(self.log, plan, epoch)
                after: list[EventData] = []
                if migration is not None:
                    after.append(self._driver.migrated(wf, state, migration))
        _log.info("run forked", run_id=new_run_id, origin=run_id, origin_seq=at_seq)
        here = self.config.execute and state.status == RunStatus.RUNNING
        mode = state.durability or self.config.durability
        await self._driver.continue_run(wf, state, epoch, deadline, mode, after, here)

    async def cancel(self, run_id: str, reason: str) -> RunState:
        """``Runtime.cancel``; a cancelled run's children are cancelled too, and
        a cancelled child's parent is told (see :mod:`agentlog.runtime._children`)."""
        state = await self._cancel(run_id, reason)
        if self._driver.children is not None and state.status == RunStatus.CANCELLED:
            await self._driver.children.run_ended(state)
        return state

    async def _cancel(self, run_id: str, reason: str) -> RunState:
        active = self._driver.active_run(run_id)
        if active is not None:
            active.request_cancel(reason)
            with contextlib.suppress(FencedError):  # taken over: cancel it from the log
                return await self._wait(run_id)
        state = await self.read_state(run_id)
        if state.is_terminal:
            return state
        if not self.log.direct_writes:
            # The owning worker applies it; give it a moment, then say how it stands.
            await self._send(Command(run_id, "cancel", RunCancelled(reason)), wait=False)
            if not waits_for_outcome():  # a worker's loop, which applies it: no wait
                return state
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.orphan_grace_seconds):
                    while not (state := await load_state(self.log, run_id)).is_terminal:  # noqa: ASYNC110 - polls the log
                        await asyncio.sleep(self.config.poll_seconds)
            return state
        for _ in range(_CANCEL_CLAIMS):
            with contextlib.suppress(FencedError):  # another forced claim came after ours
                return await self._record_cancel(run_id, reason)
            state = await load_state(self.log, run_id)
            if state.is_terminal:  # it was a cancel (or a shred) too
                return state
        raise await self._lease_held(run_id)

    async def _record_cancel(self, run_id: str, reason: str) -> RunState:
        """Take the run over and record its cancel; return its final state.

        The claim is forced (it fences the run's writer, here or elsewhere)
        and carries a lease, so that a resume, a retry or a worker claiming
        politely waits for the cancel instead of fencing it.

        Raises:
            FencedError: another forced claim took the run before the cancel
                was recorded; nothing of it was.
        """
        epoch = await self.log.claim_writer(
            run_id, owner=self.config.owner, lease_seconds=self.config.lease_seconds, force=True
        )
        try:
            state = await load_state(self.log, run_id)  # as it stands now that we own it
            writer = RunWriter(
                self.log, state, epoch=epoch, durability="sync", snapshots=self.config.snapshots
            )
            if not state.is_terminal:
                writer.emit(WriterClaimed(epoch, self.config.owner))
                writer.emit(RunCancelled(reason))
            await writer.close()
        finally:
            await self._driver.release(run_id, epoch)
        return writer.state

    async def _lease_held(self, run_id: str) -> LeaseHeldError:
        """The error for a request that another writer's forced claim outran."""
        info = await self.log.get_run(run_id)
        expires = info.lease_expires_at
        left = 0.0 if expires is None else max(0.0, (expires - utcnow()).total_seconds())
        return LeaseHeldError(run_id, info.lease_owner, left)

    async def shred(self, run_id: str) -> ShredReport:
        """``Runtime.shred``."""
        cipher, info = await check_shreddable(self.log, run_id, self.archive)
        store = cipher.keys.store
        if await shredded_already(self.log, cipher, info, self.archive):
            at = await asyncio.to_thread(store.table.shredded_at, run_id)
            return ShredReport(run_id, at or "", store.description, already=True)
        if self._driver.active_run(run_id) is not None:  # driven here: stop it at its boundary
            await self.cancel(run_id, SHRED_REASON)
        if not self.log.direct_writes:
            # The run's owning worker records the cancel; the key goes after it;
            # then the owner records RunShredded (metadata only) from a command.
            state = await self.cancel(run_id, SHRED_REASON)
            if not state.is_terminal:  # its cancel could never be sealed after the key went
                raise BackendUnavailableError(
                    f"run {run_id!r}: its owning worker did not record the cancel within "
                    f"{self.config.orphan_grace_seconds:g}s, so its key was not destroyed "
                    "and nothing changed; run shred again once a worker owns the run"
                )
            at = await asyncio.to_thread(cipher.shred, run_id)
            shredded = RunShredded(at=at, by=self.config.owner)
            await self._send(Command(run_id, "shred", shredded), wait=False)
            return ShredReport(run_id, at, store.description, cancelled=state.is_terminal)
        return await record_shred(
            self.log, cipher, run_id, self.config.owner, self.config.lease_seconds
        )
