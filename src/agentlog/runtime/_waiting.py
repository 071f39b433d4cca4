"""What ``Runtime.wait`` and ``Runtime.recover`` ask of a run's state and index row.

Pure functions over a :class:`RunState` or :class:`RunInfo`: when a run has
settled (a caller stops waiting), and what ``wait`` says when nothing drives
a run. Whether a writer's lease is live is :meth:`RunInfo.lease_live`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from agentlog.errors import NoLiveWriterError, UnknownRunError, WorkflowError
from agentlog.eventlog._base import EventReader, RunInfo
from agentlog.eventlog.events import (
    EventData,
    ResumeReceived,
    RunForked,
    RunRetried,
    RunStarted,
    RunStatus,
    WriterClaimed,
    utcnow,
)
from agentlog.projector._state import RunState, input_interrupts, interrupt_id, is_timer
from agentlog.runtime._driver import RunDriver
from agentlog.runtime._executor import code_failure
from agentlog.runtime._failures import ended_error
from agentlog.runtime._handles import PendingInterrupt

__all__ = [
    "follow",
    "values_of",
    "orphan_message",
    "orphaned",
    "outcome",
    "settled",
    "untaken_request",
]


def settled(state: RunState) -> bool:
    """True once the run ended or parked on an interrupt a human answers, or
    on a ``recv`` a message answers: anything but a sleep."""
    if state.status == RunStatus.WAITING:
        return any(not is_timer(i) for i in state.interrupts)
    return state.status in RunStatus.TERMINAL


def values_of(state: RunState, workflow: Any = None) -> dict[str, Any]:
    """What ``Runtime.result`` returns for a settled run: its final values.

    Raises:
        The failure's own class, rebuilt, or RunFailedError: the run failed
            (:func:`~agentlog.runtime._failures.ended_error`, with the run's
            ``workflow`` for the classes it may rebuild).
        RunCancelledError: the run was cancelled.
        WorkflowError: the run is waiting on an interrupt.
    """
    if state.status == RunStatus.COMPLETED:
        return state.values
    if state.status == RunStatus.WAITING:
        raise WorkflowError(
            f"run {state.run_id!r} is waiting on {len(state.interrupts)} interrupt(s), first: "
            f"{state.interrupts[0]['payload']!r}; "
            "resume it (or send the message its recv waits for) first"
        )
    raise ended_error(state, workflow)


def pending_of(state: RunState) -> list[PendingInterrupt]:
    """What ``Runtime.pending`` returns: the run's open input interrupts, oldest first."""
    return [
        PendingInterrupt(
            interrupt_id(i), i["step"], i["payload"], i.get("expects"), i.get("due_at")
        )
        for i in input_interrupts(state)
    ]


def outcome(state: RunState) -> RunState:
    """What ``wait`` returns for a settled run: its state, unless a step's
    code error failed it (then its RunFailedError, wherever it was driven)."""
    failure = code_failure(state)
    if failure is not None:
        raise failure
    return state


#: A request recorded for a driver to act on, and how ``wait`` names it.
_REQUESTS: dict[type[EventData], str] = {
    RunStarted: "started",
    ResumeReceived: "resumed",
    RunRetried: "retried",
    RunForked: "forked",
}
#: How far back from a run's last event to look for its last request: a run
#: with more events than this since its request was driven since.
_LOOK_BACK = 64


async def untaken_request(log: EventReader, info: RunInfo) -> str | None:
    """How the run's last request was recorded (``"started"``, ``"resumed"``...)
    if no writer has taken the run since; None once one has.

    The run index names the last writer that *claimed* the run, which is
    the client that recorded a request (``submit``, or ``resume`` on a client
    runtime) until a worker takes the run: a worker's claim bumps the epoch
    past the request's, and what it drives is recorded after the request.
    """
    request: str | None = None
    epoch = 0
    async for event in log.read(info.run_id, after_seq=max(0, info.last_seq - _LOOK_BACK)):
        kind = _REQUESTS.get(type(event.data))
        if kind is not None:
            request, epoch = kind, event.writer_epoch
        elif not isinstance(event.data, WriterClaimed):
            request = None  # recorded by a writer that drove the run
    if request is None or info.writer_epoch > epoch:
        return None
    return request


def orphan_message(
    run_id: str, info: RunInfo | None, grace: float, untaken: str | None = None
) -> str:
    """Why ``wait`` gave up on a run nothing drives, and what to do about it.

    ``untaken``: how the run's last request was recorded, when no writer has
    taken the run since (:func:`untaken_request`).
    """
    if info is None or info.last_seq == 0:
        why, workflow = "it was sent as a command and no owner recorded it yet", "its"
    elif info.status == RunStatus.WAITING:
        why = f"its timer was due at {info.wake_at:%Y-%m-%d %H:%M:%S} UTC"
        workflow = repr(info.workflow)
    elif untaken is not None:
        by = f" by {info.lease_owner!r}" if info.lease_owner else ""
        why = f"it was {untaken}{by} and no worker has taken it yet"
        workflow = repr(info.workflow)
    else:
        why = f"it is running and its last writer {info.lease_owner or 'unknown'!r} is gone"
        workflow = repr(info.workflow)
    return (
        f"run {run_id!r} needs a driver ({why}) and no live worker took it in "
        f"{grace:g}s. Start a worker that knows workflow {workflow} "
        "(agentlog worker --app module:attr), or continue it here with "
        "Runtime.recover() or `agentlog recover`."
    )


async def orphaned(
    log: EventReader, run_id: str, info: RunInfo | None, grace: float
) -> NoLiveWriterError:
    """The error ``wait`` raises for a run no live worker took in ``grace`` seconds."""
    untaken = None
    if info is not None and info.status == RunStatus.RUNNING:
        untaken = await untaken_request(log, info)
    return NoLiveWriterError(orphan_message(run_id, info, grace, untaken))


async def follow(
    driver: RunDriver,
    read_state: Callable[[str], Awaitable[RunState]],
    will_take: Callable[[RunInfo], bool],
    run_id: str,
) -> RunState:
    """``Runtime.wait`` without its timeout: follow the run until it settles.

    A run executing in this process (``driver``) is awaited; one executing
    elsewhere is followed through the log, read with ``read_state`` (the log,
    or the runtime's archive); ``will_take`` says whether this process's
    worker will take a run that needs a driver.
    """
    log, config = driver.log, driver.config
    orphaned_at: float | None = None
    while True:
        active = driver.active_task(run_id)
        if active is not None and not active.done():
            # A snapshot: the live state is the executor's own.
            state = (await asyncio.shield(active)).copy()
            if settled(state):
                return outcome(state)
            continue  # asleep on a timer, or handed over: a worker goes on
        if active is not None:  # ended just now: its result says how
            state = active.result().copy()
            if settled(state):
                return outcome(state)
        info = await log.find_run(run_id)
        # None or empty: sent as a command its owner has not recorded yet.
        queued = info is None or info.last_seq == 0
        if queued and log.direct_writes:
            raise UnknownRunError(run_id, log.url)
        if info is not None and not queued:
            if info.status in RunStatus.TERMINAL:
                return outcome(await read_state(run_id))
            if info.status == RunStatus.WAITING:
                state = await read_state(run_id)
                if settled(state):
                    return state
        driven = info is not None and (
            (not queued and not info.needs_worker(utcnow())) or will_take(info)
        )
        if driven:
            orphaned_at = None
        elif orphaned_at is None:
            orphaned_at = time.monotonic()
        elif time.monotonic() - orphaned_at > config.orphan_grace_seconds:
            raise await orphaned(log, run_id, info, config.orphan_grace_seconds)
        await asyncio.sleep(config.poll_seconds)
