"""What ``Runtime.wait`` and ``Runtime.recover`` ask of a run's state and index row.

Pure functions over a :class:`RunState` or :class:`RunInfo`: when a run has
settled (a caller stops waiting), and what ``wait`` says when nothing drives
a run. Whether a writer's lease is live is :meth:`RunInfo.lease_live`.
"""

from __future__ import annotations

from agentlog.errors import NoLiveWriterError
from agentlog.eventlog._base import EventReader, RunInfo
from agentlog.eventlog.events import (
    EventData,
    ResumeReceived,
    RunForked,
    RunRetried,
    RunStarted,
    RunStatus,
    WriterClaimed,
)
from agentlog.projector._state import RunState, input_interrupts
from agentlog.runtime._executor import code_failure

__all__ = ["orphan_message", "orphaned", "outcome", "settled", "untaken_request"]


def settled(state: RunState) -> bool:
    """True once the run ended or parked on an interrupt a human answers."""
    if state.status == RunStatus.WAITING:
        return bool(input_interrupts(state))
    return state.status in RunStatus.TERMINAL


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
