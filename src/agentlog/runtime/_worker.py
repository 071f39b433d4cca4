"""The worker: a loop that finds the runs that need driving and drives them.

A run needs a driver when it is running and no live writer holds its lease
(just submitted or resumed by a client, or its writer died), or when it
waits on a timer that is due (:meth:`RunInfo.needs_worker`). The worker asks
the log for those runs (:meth:`EventLog.runnable`), claims each with
``force=False`` and continues it, up to its concurrency limits:

* ownership is the writer lease: a claim bumps the run's epoch, which fences
  any older writer, and a lease that is not renewed expires, so when a worker
  dies (SIGKILL) another one takes its runs over once their leases end;
* a timer is an interrupt the clock answers: the worker records
  ``TimerFired`` for the due ones and the sleeping step runs again;
* a graceful stop (SIGTERM) lets every run finish its current superstep,
  records it, and releases the lease, so another worker continues at once;
* schedules submit one run per cron tick (the run id comes from the tick).

Several workers share one log: whichever claims a run first drives it and
the others get ``LeaseHeldError`` and move on. Nothing here depends on
wall-clock luck for safety: a paused worker that wakes after its lease ended
is fenced by the newer claim, and checks its own lease clock before each
side effect, last where the effect is called (see
:meth:`~agentlog.runtime._writer.RunWriter.run_effect`).

A worker holds its runtime's :class:`~agentlog.runtime._driver.RunDriver`,
which claims and drives the runs, and the log it asks for due work; it knows
no ``Runtime``. Schedule ticks are submitted through the ``submit`` it is
given (the runtime passes its own :meth:`Runtime.submit`), so a tick is
checked and recorded as any client's request is.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from agentlog._logging import get_logger
from agentlog.errors import (
    AgentlogError,
    BackendUnavailableError,
    FencedError,
    LeaseExpiredError,
    LeaseHeldError,
    RunNotWaitingError,
)
from agentlog.eventlog._base import Command, EventLog, RunInfo
from agentlog.eventlog.events import RunStatus, utcnow
from agentlog.runtime._cancelling import task_cancelling
from agentlog.runtime._commands import apply_command, worker_loop
from agentlog.runtime._config import WorkerConfig
from agentlog.runtime._driver import RunDriver
from agentlog.runtime._queue_admission import arrange
from agentlog.runtime._schedules import Schedule

__all__ = ["SubmitTick", "Worker", "WorkerConfig"]

_log = get_logger("agentlog.worker")

#: A run that could not be taken over (a corrupt event, changed code) is
#: tried again after this long, not on every pass.
_RETRY_BROKEN = timedelta(seconds=30)
#: Errors that mean another writer has the run now: nothing to hold back.
_LOST_THE_RUN = (FencedError, LeaseExpiredError)
#: The longest pause between two passes while the log is unreachable.
_MAX_BACKOFF_S = 5.0

#: How a worker submits a schedule tick's run: ``submit(workflow, run_id, input)``.
SubmitTick = Callable[[str, str, dict[str, Any] | None], Awaitable[object]]


class Worker:
    """Drives the runs of one runtime's workflows that need a driver.

    Use :meth:`Runtime.serve` (or ``agentlog worker``) to run one in the
    foreground; a runtime with ``RuntimeConfig(worker=True)`` runs one in the
    background.

    Args:
        driver: claims and drives the runs (its workflows are the ones taken).
        event_log: the log asked for due runs, timers and commands.
        config: concurrency limits and polling.
        submit: how a schedule tick's run is submitted; without it, no
            schedule is ticked.
    """

    def __init__(
        self,
        driver: RunDriver,
        log: EventLog,
        config: WorkerConfig | None = None,
        *,
        submit: SubmitTick | None = None,
    ) -> None:
        self.driver = driver
        self.log = log
        self.config = config or WorkerConfig()
        #: Set to look for work at once: the driver's, which sets it when it
        #: lets go of a run for a worker.
        self.wake = driver.wake
        self._submit = submit
        self._background: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._retry: list[Command] = []
        #: Per run, the commands its chain (a task) applies, in order; the
        #: chains run in the background of the passes (see _apply_commands).
        self._applying: dict[str, list[Command]] = {}
        self._chains: set[asyncio.Task[None]] = set()
        self._chain_error: Exception | None = None
        self._hand_over = True
        self._broken: dict[str, datetime] = {}
        self._unknown: set[str] = set()
        self._passed_over = 0
        self._cursors: dict[tuple[str, str], datetime] = {}
        self._last_schedule_pass: datetime | None = None

    # -- the loop ---------------------------------------------------------------

    async def run(self) -> None:
        """Drive runs until :meth:`stop`; then hand every run over and return."""
        _log.info("worker started", owner=self.driver.config.owner)
        backoff = 0.0
        try:
            while not self._stopping.is_set() and not task_cancelling():
                try:
                    with worker_loop():  # its own requests (ticks) never wait on itself
                        await self._pass(None)
                    backoff = 0.0
                except Exception as exc:  # the log is unreachable: say so, back off, go on
                    backoff = min(max(backoff * 2, self.config.poll_seconds), _MAX_BACKOFF_S)
                    _log.warning("worker pass failed; retrying", error=repr(exc), retry_in=backoff)
                    await _wait(self._stopping, backoff)
                await self._idle()
        finally:  # commands being applied: finished on a stop, cancelled on a close
            await self._end_chains(cancel=not self._hand_over or task_cancelling())
        if self._hand_over:  # stopped by stop(), not by Runtime.close()
            await self.driver.hand_over()
        _log.info("worker stopped", owner=self.driver.config.owner)

    def stop(self, *, hand_over: bool = True) -> None:
        """Stop taking work; running runs finish their current superstep and
        are handed over (their leases released for another worker)."""
        self._hand_over = hand_over
        self._stopping.set()
        self.wake.set()
        if hand_over:  # at once: a run must not start another step meanwhile
            for executor in self.driver.active_runs.values():
                executor.hand_over_requested.set()

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stopping.is_set()

    def start_background(self) -> None:
        """Run this worker in the background, from the first call (once)."""
        if self._background is None:
            self._background = asyncio.create_task(self.run(), name="agentlog worker")

    @property
    def in_background(self) -> bool:
        """True while this worker runs in the background."""
        return self._background is not None and not self._background.done()

    def will_take(self, info: RunInfo) -> bool:
        """True if this worker runs in the background and will take the run
        (its workflow is known here); it is woken to take it now."""
        if self.in_background and info.workflow in self.driver.workflows and not self.stopping:
            self.wake.set()
            return True
        return False

    async def close(self) -> None:
        """Stop the background worker, if it runs, without handing runs over
        (:meth:`Runtime.close` cancels them instead)."""
        if self._background is not None:
            self.stop(hand_over=False)
            self._background.cancel()
            with contextlib.suppress(BaseException):
                await self._background

    async def run_once(self, *, now: datetime | None = None) -> list[str]:
        """One pass: submit due schedule ticks, then take the due runs there is
        room for. Returns the run ids it took.

        Args:
            now: the time the pass acts at (default: the clock's now); tests
                pass a later time to play a worker that comes back after an
                outage.
        """
        taken = await self._pass(now)
        await self._end_chains(cancel=False)  # its commands applied when it returns
        self._raise_chain_error()
        return taken

    async def _pass(self, now: datetime | None) -> list[str]:
        now = now or utcnow()
        if self.config.schedules and self._submit is not None:
            await self._schedule_pass(now, self._submit)
        free = self.config.concurrency - len(self.driver.active_runs)
        if free <= 0 or self.stopping:
            return []
        await self._apply_commands(free)
        free = self.config.concurrency - len(self.driver.active_runs)
        # Ask for more than there is room for: some are passed over below (an
        # unknown workflow, one at its limit, a broken run). They must not hide
        # the runs behind them, so ask past twice as many as the last pass
        # passed over: a backlog of any size is read through in a few passes.
        limit = free * 2 + 2 * self._passed_over + 16
        due = await self.log.runnable(now=now, limit=limit)
        if self.driver.queues:  # their runs, as their queues have room
            due = await arrange(self.log, due, self.driver.queues, self.driver.queue_of, free)
        taken: list[str] = []
        passed_over = 0
        for info in due:
            if len(taken) >= free or self.stopping:
                break
            if await self._take(info, now):
                taken.append(info.run_id)
            else:
                passed_over += 1
        self._passed_over = passed_over
        return taken

    # -- internals ----------------------------------------------------------------

    async def _apply_commands(self, free: int) -> None:
        """Clients' requests for the runs this worker owns (logs without direct
        writes): each is applied, then acked; one not applied comes again.

        One run's commands in order, by one chain (a task) per run; different
        runs side by side, so that their claims and first appends share
        commits. The chains go on in the background of the passes: the next
        pass takes and starts more commands while earlier ones commit, so
        the commits of many passes overlap (waiting for every command of a
        pass capped a worker near 20 starts a second on Kafka). A command of
        a run whose chain is still going joins the end of that chain.
        """
        self._raise_chain_error()
        log_ = self.log
        if log_.direct_writes:
            return
        room = max(free, 1) * 2 - sum(map(len, self._applying.values()))
        taken = await log_.take_commands(limit=room) if room > 0 else []
        # A log hands a command out once (Kafka, per ownership) or until it
        # is acked (memory): the ones not applied yet are kept here, once.
        again, self._retry = self._retry, []
        known = {_command_key(c) for c in again}
        known.update(_command_key(c) for cmds in self._applying.values() for c in cmds)
        for command in [*again, *(c for c in taken if _command_key(c) not in known)]:
            chain = self._applying.get(command.run_id)
            if chain is not None:
                chain.append(command)
                continue
            self._applying[command.run_id] = [command]
            task = asyncio.create_task(self._apply_in_order(command.run_id))
            self._chains.add(task)
            task.add_done_callback(self._chains.discard)

    async def _apply_in_order(self, run_id: str) -> None:
        commands = self._applying[run_id]
        try:
            while commands:
                outcome = await apply_command(self.driver, commands[0])
                if outcome == "ack" and not await self._acked(commands[0]):
                    outcome = "retry"
                if outcome == "retry":
                    self._retry.extend(commands)  # the rest waits behind it, in order
                    return
                commands.pop(0)
        except Exception as exc:  # the next pass says so and backs off (as a pass's
            # own error did); the run's commands are not taken again here, so
            # that one that always fails cannot hold every later pass.
            self._chain_error = exc
        finally:
            del self._applying[run_id]

    async def _acked(self, command: Command) -> bool:
        """Ack ``command``; False if the ack's commit is in doubt: the command is
        applied and acked again (a log hands a command out once per ownership, so
        an ack dropped here would leave it unanswered and its run's later commands
        unapplied). A log does not answer a command twice, so a landed ack is not."""
        try:
            await self.log.ack_command(command)
        except BackendUnavailableError as exc:
            _log.info("command ack in doubt; acked again", run_id=command.run_id, error=str(exc))
            return False
        return True

    async def _end_chains(self, *, cancel: bool) -> None:
        """Wait for the commands being applied (cancelled first if ``cancel``)."""
        chains = list(self._chains)
        for chain in chains if cancel else ():
            chain.cancel()
        await asyncio.gather(*chains, return_exceptions=True)

    def _raise_chain_error(self) -> None:
        error, self._chain_error = self._chain_error, None
        if error is not None:
            raise error

    async def _take(self, info: RunInfo, now: datetime) -> bool:
        driver = self.driver
        if driver.active_run(info.run_id) is not None or info.run_id in self._applying:
            return False
        wf = driver.workflows.get(info.workflow)
        if wf is None:
            if info.workflow not in self._unknown:
                self._unknown.add(info.workflow)
                _log.warning(
                    "run waits for a worker that knows its workflow",
                    run_id=info.run_id,
                    workflow=info.workflow,
                    known=sorted(driver.workflows),
                    fix=driver.config.workflow_hint,
                )
            return False
        limit = self.config.workflow_concurrency.get(wf.name)
        if limit is not None and driver.active_count(wf.name) >= limit:
            return False
        broken_until = self._broken.get(info.run_id)
        if broken_until is not None and broken_until > now:
            return False
        try:
            if info.status == RunStatus.WAITING:
                await driver.fire_timers(wf, info.run_id)
            else:
                await driver.take_over(wf, info.run_id, lapsed=info.lease_expires_at is not None)
        except (LeaseHeldError, RunNotWaitingError):
            return False  # another worker got there first, or it moved on
        except AgentlogError as exc:
            _log.warning("run not taken over", run_id=info.run_id, error=str(exc))
            self._broken[info.run_id] = now + _RETRY_BROKEN
            return False
        self._broken.pop(info.run_id, None)
        active = driver.active_task(info.run_id)
        if active is not None:
            active.add_done_callback(lambda task: self._drive_ended(info.run_id, task))
        return True

    def _drive_ended(self, run_id: str, task: asyncio.Task[Any]) -> None:
        """A run stopped on an error of ours (a contract error in its code): not
        again at once, or a worker would spin on it; say why."""
        if task.cancelled():
            return
        exc = task.exception()
        if isinstance(exc, AgentlogError) and not isinstance(exc, _LOST_THE_RUN):
            _log.warning("run stopped on an error; retried later", run_id=run_id, error=str(exc))
            self._broken[run_id] = utcnow() + _RETRY_BROKEN
        self.wake.set()  # a slot is free

    async def _idle(self) -> None:
        """Sleep until the poll interval, the next timer, or a wake-up."""
        timeout = self.config.poll_seconds
        with contextlib.suppress(AgentlogError):
            wake_at = await self.log.next_wake()
            if wake_at is not None:
                timeout = min(timeout, max(0.0, (wake_at - utcnow()).total_seconds()))
        await _wait(self.wake, timeout)
        self.wake.clear()

    async def _schedule_pass(self, now: datetime, submit: SubmitTick) -> None:
        # Ticks are at most once a minute apart in cron: a pass a second is plenty.
        if self._last_schedule_pass and now - self._last_schedule_pass < timedelta(seconds=1):
            return
        self._last_schedule_pass = now
        for wf in list(self.driver.workflows.values()):
            for entry in wf.schedules:
                await self._submit_ticks(entry, now, submit)

    async def _submit_ticks(self, entry: Schedule, now: datetime, submit: SubmitTick) -> None:
        key = (entry.workflow, entry.cron)
        after = self._cursors.get(key, now - entry.catchup)
        for tick in entry.ticks(after, now):
            run_id = entry.run_id(tick)
            try:
                if await self.log.find_run(run_id) is None:
                    await submit(entry.workflow, run_id, entry.input_for(tick))
                    _log.info("schedule tick submitted", run_id=run_id, cron=entry.cron)
            except Exception as exc:  # the user's input function too: say so, go on
                _log.warning("schedule tick not submitted", run_id=run_id, error=repr(exc))
                return  # this tick again on the next pass
            self._cursors[key] = tick


async def _wait(event: asyncio.Event, seconds: float) -> None:
    """Wait for ``event`` at most ``seconds``. Not ``asyncio.wait_for``: on
    Python 3.11 it can swallow a cancellation that races with the event."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()


def _command_key(command: Command) -> object:
    return command.ref if command.ref is not None else id(command)
