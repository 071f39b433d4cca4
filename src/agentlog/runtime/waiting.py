"""What ``Runtime.wait`` and ``Runtime.recover`` ask of a run's state and index row.

Pure functions over a :class:`RunState` or :class:`RunInfo`: when a run has
settled (a caller stops waiting), whether a writer's lease is live (recover
leaves such a run alone), and what ``wait`` says when nothing drives a run.
"""

from __future__ import annotations

from agentlog.eventlog.base import RunInfo
from agentlog.eventlog.events import RunStatus, utcnow
from agentlog.projector.state import RunState, input_interrupts
from agentlog.runtime.executor import code_failure

__all__ = ["lease_live", "orphan_message", "outcome", "settled"]


def lease_live(info: RunInfo) -> bool:
    """True while a writer holds the run's lease (by this clock)."""
    return info.lease_expires_at is not None and info.lease_expires_at > utcnow()


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


def orphan_message(run_id: str, info: RunInfo | None, grace: float) -> str:
    """Why ``wait`` gave up on a run nothing drives, and what to do about it."""
    if info is None or info.last_seq == 0:
        why, workflow = "it was sent as a command and no owner recorded it yet", "its"
    elif info.status == RunStatus.WAITING:
        why = f"its timer was due at {info.wake_at:%Y-%m-%d %H:%M:%S} UTC"
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
