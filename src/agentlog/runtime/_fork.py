"""Forking a run: a new run that starts from another run's state at a seq.

``Runtime.fork(origin, at_seq, new_run_id=..., updates=...)`` in three moves:

1. **check** everything before anything is recorded: the new run id is
   free (in the hot log and the archive), the origin exists, ``at_seq`` is
   one of its seqs, it was not shredded, its workflow is registered here,
   ``updates`` are storable and declared in the workflow's state;
2. **copy** the origin's events ``1..at_seq`` (from the hot log, or the
   archive when they were archived and pruned) into the new run, in one
   append together with :class:`~agentlog.eventlog.events.RunForked` (the
   marker, with the updates as its writes), so a fork is on record whole or
   not at all;
3. **drive** the new run like any resumed run, under the workflow code
   registered now.

What a copy changes, and why:

* the run id, and so every task's idempotency key, which is derived from it
  (:func:`~agentlog.runtime._task_calls.idempotency_key`): the new run's steps
  find the origin's recorded results under their own keys, so tasks before
  the fork point return those results and never run again, while a task
  the origin had started but not finished at ``at_seq`` runs again, under
  the fork's key (the fork is another run: a service must not drop its
  effect as a duplicate of the origin's);
* the origin's ``WriterClaimed`` events are dropped: they record who wrote
  the origin, and epochs belong to one run's writers. Every copied event is
  written at the fork's own writer epoch. Seqs are therefore renumbered
  without gaps; ``RunForked`` says which origin seq the fork starts from;
* encrypted content is opened with the origin's key and sealed again by the
  log with the new run's key (the copies are new events: the origin's
  ciphertext is never copied, as it is bound to the origin's run id and seq);
* the events keep their timestamps (they are the history the fork grew from).

Forking in the middle of a step or a superstep behaves as a crash at that
seq would: branches whose writes are recorded keep them, recorded task
results are returned, every other branch runs again. A fork at a seq where
the origin was parked is parked on the same interrupts (resume it); one at
the origin's last event of a finished run is finished too (a failed one can
be retried).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from agentlog.errors import (
    ConfigError,
    LeaseHeldError,
    ReplayError,
    RunExistsError,
    ShreddedError,
    UnknownRunError,
)
from agentlog.eventlog._base import EventLog, EventReader, check_run_id
from agentlog.eventlog.codec import pack
from agentlog.eventlog.events import (
    Event,
    EventData,
    MessageReceived,
    RunForked,
    RunShredded,
    RunStarted,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
    WriterClaimed,
)
from agentlog.projector._fold import fold
from agentlog.projector._state import RunState
from agentlog.runtime._task_calls import idempotency_key
from agentlog.runtime._workflow import Workflow

__all__ = ["ForkPlan", "copy_events", "plan_fork", "record_fork"]


@dataclasses.dataclass(frozen=True, slots=True)
class ForkPlan:
    """A checked fork, ready to record (nothing is recorded yet)."""

    origin_run_id: str
    origin_seq: int
    new_run_id: str
    workflow: Workflow[Any, Any]
    origin_events: list[Event]
    """The origin's events 1..origin_seq, as read (content opened)."""
    updates: dict[str, Any]


def _check_updates(updates: Mapping[str, Any] | None, wf: Workflow[Any, Any]) -> dict[str, Any]:
    if updates is None:
        return {}
    if not isinstance(updates, Mapping) or not all(isinstance(k, str) for k in updates):
        raise ConfigError(
            f"updates must be a mapping of state keys to values, got {type(updates).__name__}"
        )
    chosen = dict(updates)
    undeclared = sorted(set(chosen) - set(wf.reducers)) if wf.reducers else []
    if undeclared:
        raise ConfigError(
            f"updates name keys {undeclared} that are not in the state of workflow "
            f"{wf.name!r} (keys: {sorted(wf.reducers)}); nothing was recorded"
        )
    pack(chosen, path="updates")  # NotSerializableError before anything is recorded
    return chosen


async def _check_not_shredded(log: EventReader, run_id: str, last_seq: int) -> None:
    """Refuse a shredded origin, even in a process that still caches its key
    (a fork would otherwise seal its content again under a live key)."""
    cipher = log.cipher
    if cipher is not None and await asyncio.to_thread(cipher.keys.store.is_shredded, run_id):
        raise ShreddedError(run_id, where=log.url)
    last = [e async for e in log.read(run_id, after_seq=last_seq - 1)]
    if last and isinstance(last[-1].data, RunShredded):
        raise ShreddedError(run_id, last[-1].data.at, where=log.url)


async def _check_new_run_id(log: EventReader, new_run_id: str) -> None:
    if not new_run_id:
        raise ConfigError("fork() needs a new_run_id: the id of the run it creates")
    check_run_id(new_run_id)
    info = await log.find_run(new_run_id)
    if info is not None and info.last_seq > 0:
        raise RunExistsError(
            f"run {new_run_id!r} exists already ({info.status}, workflow "
            f"{info.workflow!r}); a fork creates a new run: pick another id. "
            "Nothing was recorded."
        )


async def plan_fork(
    log: EventReader,
    origin_run_id: str,
    at_seq: int,
    new_run_id: str,
    updates: Mapping[str, Any] | None,
    workflow_named: Callable[[str], Workflow[Any, Any]],
) -> ForkPlan:
    """Check a fork and read what it copies (step 1 of the module docstring).

    Raises:
        ConfigError: a bad ``at_seq``, new run id or ``updates``.
        UnknownRunError: no such origin (RunArchivedError: archived, and no
            archive given to read it from).
        RunExistsError: ``new_run_id`` is taken.
        ShreddedError: the origin was shredded.
        UnknownWorkflowError: the origin's workflow is not registered.
        NotSerializableError: ``updates`` cannot be stored.
        EncryptionError: the origin's content cannot be opened here.
    """
    if not isinstance(at_seq, int) or isinstance(at_seq, bool) or at_seq < 1:
        raise ConfigError(f"at_seq must be a whole number, 1 or more; got {at_seq!r}")
    info = await log.find_run(origin_run_id)
    if info is None or info.last_seq == 0:
        raise UnknownRunError(origin_run_id, log.url)
    if at_seq > info.last_seq:
        raise ConfigError(
            f"run {origin_run_id!r} has no seq {at_seq}; its last seq is {info.last_seq}. "
            "Nothing was recorded."
        )
    await _check_new_run_id(log, new_run_id)
    await _check_not_shredded(log, origin_run_id, info.last_seq)
    events = [e async for e in log.read(origin_run_id, upto_seq=at_seq)]
    if [e.seq for e in events] != list(range(1, at_seq + 1)):
        got = f"seqs {events[0].seq}..{events[-1].seq}" if events else "no events"
        raise ReplayError(
            f"run {origin_run_id!r}: reading seqs 1..{at_seq} to fork gave {got}; "
            "its history is incomplete here (pruned? pass the archive it went to)"
        )
    for event in events:
        if event.unreadable is not None:  # no key here, or shredded: never copy a blank
            raise event.unreadable
    first = events[0].data
    if not isinstance(first, RunStarted):
        raise ReplayError(
            f"run {origin_run_id!r} starts with {first.type}, not RunStarted: only "
            "workflow runs can be forked"
        )
    wf = workflow_named(first.workflow)
    return ForkPlan(origin_run_id, at_seq, new_run_id, wf, events, _check_updates(updates, wf))


def copy_events(events: Sequence[Event], new_run_id: str, epoch: int) -> list[Event]:
    """The origin's ``events`` as the new run's (see the module docstring):
    renumbered from 1, task keys of the new run, without WriterClaimed; a
    received message names its MessageSent by the new seq."""
    keys: dict[str, str] = {}
    seqs: dict[int, int] = {}
    copied: list[Event] = []
    for event in events:
        data: EventData = event.data
        if isinstance(data, WriterClaimed):
            continue
        if isinstance(data, TaskStarted):
            key = idempotency_key(
                new_run_id, data.step, data.superstep, data.branch, data.name, data.call_index
            )
            keys[data.key] = key
            data = dataclasses.replace(data, key=key)
        elif isinstance(data, TaskCompleted | TaskFailed):
            data = dataclasses.replace(data, key=keys.get(data.key, data.key))
        elif isinstance(data, MessageReceived):
            data = dataclasses.replace(data, seq=seqs.get(data.seq, data.seq))
        seqs[event.seq] = len(copied) + 1
        # A new Event: no ``sealed`` blob, so the log seals it with the new run's key.
        copied.append(Event(new_run_id, len(copied) + 1, data, ts=event.ts, writer_epoch=epoch))
    return copied


@contextlib.contextmanager
def claim_of_new_run(new_run_id: str) -> Iterator[None]:
    """Around the claim of the fork's new run id: losing it to another
    process's (or task's) claim means that run is being created elsewhere, so
    the caller gets RunExistsError, as when its events are already there."""
    try:
        yield
    except LeaseHeldError as exc:
        raise RunExistsError(
            f"run {new_run_id!r} is being created elsewhere (another writer claimed that id "
            "first); a fork creates a new run: pick another id. Nothing was recorded."
        ) from exc


async def record_fork(log: EventLog, plan: ForkPlan, epoch: int) -> RunState:
    """Record the fork as the new run's claimed writer at ``epoch`` (step 2);
    return the new run's state.

    Raises:
        RunExistsError: another process recorded the new run id meanwhile.
    """
    info = await log.find_run(plan.new_run_id)
    if info is not None and info.last_seq > 0:  # recorded between the check and the claim
        raise RunExistsError(f"run {plan.new_run_id!r} was just created elsewhere; pick another id")
    copied = copy_events(plan.origin_events, plan.new_run_id, epoch)
    marker = RunForked(plan.origin_run_id, plan.origin_seq, plan.updates)
    copied.append(Event(plan.new_run_id, len(copied) + 1, marker, writer_epoch=epoch))
    state = fold(copied, reducers=plan.workflow.reducer_table)
    await log.append(copied, durable=True)
    return state
