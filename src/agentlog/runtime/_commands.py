"""Client requests as commands, for logs whose workers own the runs.

On SQLite and memory a client records its request itself: it claims the
run, appends (RunStarted, ResumeReceived, RunRetried, RunCancelled) and lets
go, and a worker picks the run up. On a log without direct writes (Kafka with
a consumer group: each worker owns partitions of runs, fenced by its
partition's transactional producer), a client sends a :class:`Command` and
the run's owner applies it here, so every run keeps exactly one writer.

Applying a command is idempotent, so one delivered twice (a worker died
between applying and acking it) changes nothing the second time: a start of
an existing run, a resume whose interrupts are answered, a retry of a run
that no longer failed and a cancel of an ended run are each refused quietly
and acked.

A client learns the outcome of its resume or retry where the log reports it
(:meth:`EventLog.command_outcome`; Kafka does): of two answers to one
interrupt one is applied and the other refused, and the refused caller gets
the error a log written directly gives. (A submit does not wait: a start
has no loser, and the Kafka log makes the client's reads of the run wait
for it instead.) Requests sent from a worker's own loop (a schedule's tick)
or from a run it drives do not wait: the loop that would apply them is the
one waiting (:func:`worker_loop`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal

from agentlog._logging import get_logger
from agentlog.errors import (
    AgentlogError,
    BackendUnavailableError,
    FencedError,
    LeaseHeldError,
    RunNotFailedError,
    RunNotWaitingError,
    WorkflowError,
)
from agentlog.eventlog._base import Command, EventLog
from agentlog.eventlog.events import EventData, RunShredded, RunStarted, RunStatus
from agentlog.projector._snapshots import load_state
from agentlog.projector._state import RunState
from agentlog.runtime._driver import RunDriver
from agentlog.runtime._expects import answers_for
from agentlog.runtime._messages import apply_send
from agentlog.runtime._shred import record_shredded

__all__ = ["Outcome", "apply_command", "refused", "send", "waits_for_outcome", "worker_loop"]

_log = get_logger("agentlog.worker")


#: What the worker does with a command once it tried to apply it.
Outcome = Literal["ack", "retry", "drop"]

#: True inside a worker's loop and the runs it drives (tasks copy it).
_IN_WORKER: ContextVar[bool] = ContextVar("agentlog_in_worker", default=False)


@contextmanager
def worker_loop() -> Iterator[None]:
    """Mark the code inside as a worker's loop: the requests it sends do not
    wait for their outcome (the loop itself applies commands)."""
    token = _IN_WORKER.set(True)
    try:
        yield
    finally:
        _IN_WORKER.reset(token)


def waits_for_outcome() -> bool:
    """Whether a request sent here may wait for its owner's outcome."""
    return not _IN_WORKER.get()


def refused(command: Command, status: str) -> WorkflowError:
    """The error for a request its owner refused for a reason the caller's
    own check did not see (the owner's log says which: "command refused")."""
    error = RunNotFailedError if command.kind == "retry" else RunNotWaitingError
    return error(
        f"run {command.run_id!r} is {status}; its owning worker refused the {command.kind} "
        'request and nothing was recorded. The worker\'s log says why ("command refused").'
    )


async def send(
    log: EventLog,
    command: Command,
    *,
    wake: asyncio.Event,
    wait: bool = True,
    check: Callable[[RunState], None] | None = None,
) -> None:
    """Send a request to the run's owning worker (logs without direct writes).

    ``wake`` is set: this process's worker may own the run. With ``wait``,
    return once the owner applied or refused it (a log that reports
    outcomes: Kafka), so this process's reads show it. A refused request
    raises what ``check`` raises on the run as it is now, the error a log
    written directly gives (no ``check``: a refusal is fine).
    """
    sent = await log.send_command(command)
    wake.set()
    if not wait or not waits_for_outcome():
        return
    if await log.command_outcome(sent) is False and check is not None:
        state = await load_state(log, command.run_id)
        check(state)
        raise refused(command, state.status)


async def apply_command(driver: RunDriver, command: Command) -> Outcome:
    """Apply one command as the run's owner, through its ``driver``.

    Returns:
        "ack": applied or refused for good; ack it. "retry": not yet (the
        log is unreachable, the run's writer lets go of it in a moment, or
        a cancel of a run driven here interrupts its running superstep
        and is acked by the RunCancelled it appends, which commits it on
        Kafka); the worker tries it again on its next pass. "drop": this process no longer owns the
        run; the new owner gets the command.
    """
    try:
        return "ack" if await _apply(driver, command) else "retry"
    except FencedError as exc:  # NotOwnerError too: the partition moved
        _log.info("command left to the run's new owner", run_id=command.run_id, error=str(exc))
        return "drop"
    except (BackendUnavailableError, LeaseHeldError) as exc:
        _log.info("command not applied yet", run_id=command.run_id, error=str(exc))
        return "retry"
    except AgentlogError as exc:
        _log.warning("command refused", run_id=command.run_id, kind=command.kind, error=str(exc))
    return "ack"


async def _apply(driver: RunDriver, command: Command) -> bool:
    run_id, kind = command.run_id, command.kind
    info = await driver.log.find_run(run_id)
    exists = info is not None and info.last_seq > 0
    if kind == "start":
        if not exists and isinstance(command.data, RunStarted):
            await driver.record(run_id, lambda state: [], start=command.data)
        return True
    if not exists:
        _log.warning("command for an unknown run", run_id=run_id, kind=kind)
        return True
    if kind == "shred":
        if isinstance(command.data, RunShredded):
            config = driver.config
            await record_shredded(
                driver.log, run_id, command.data, config.owner, config.lease_seconds
            )
        return True
    if kind == "send":  # a message (Runtime.send): see runtime/_messages.py
        return await apply_send(driver, command)
    if kind == "cancel":
        active = driver.active_run(run_id)
        if active is not None:
            active.request_cancel(getattr(command.data, "reason", ""))  # it stops at once
            return False  # acked by the RunCancelled it records then
        await driver.record(run_id, _unless_ended(command.data))
        await _cancelled(driver, run_id)
        return True
    check = _still_waiting if kind == "resume" else _still_failed
    await driver.record(run_id, lambda state: check(state, command.data))
    return True


async def _cancelled(driver: RunDriver, run_id: str) -> None:
    """A run ended by a cancel this worker applied: wake its parent, cancel its
    children (as its driver does for a run it drove). Also when it was
    cancelled before: a second cancel finishes a cascade cut short by a crash."""
    state = await load_state(driver.log, run_id)
    if driver.children is not None and state.status == RunStatus.CANCELLED:
        await driver.children.run_ended(state)


def _unless_ended(data: EventData) -> Callable[[RunState], list[EventData]]:
    def events(state: RunState) -> list[EventData]:
        return [] if state.is_terminal else [data]

    return events


def _still_waiting(state: RunState, data: EventData) -> list[EventData]:
    answers = getattr(data, "answers", None) or {}
    if state.status != RunStatus.WAITING:
        return []
    answers_for(state, None, answers)  # raises if no longer open: refused, acked
    return [data]


def _still_failed(state: RunState, data: EventData) -> list[EventData]:
    return [data] if state.status == RunStatus.FAILED else []
