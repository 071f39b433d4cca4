"""Streaming: follow a run live, from any process, as it is recorded.

``stream(log, run_id, mode=...)`` reads the run's events from the log and
then follows it through :meth:`EventReader.tail` (a backend wakes at once on its
own appends and polls for other processes'), so a watcher needs nothing but
the log: it may run in the process that drives the run, in another process,
or on another machine, and it never writes. What it yields depends on the
mode:

============  ================================================================
mode          one :class:`StreamUpdate` per ...
============  ================================================================
``events``    recorded event, whatever its type (``data``: its payload dict)
``updates``   finished step (``data``: its writes, a delta), published
              progress (``data``: what ``ctx.progress`` was given),
              interrupt raised (``data``: its payload) and value
              published (``data``: ``{key: value}`` of ``ctx.publish``)
``values``    change of the state's values: the run's start (its input),
              each committed superstep and each migration (``data``: the
              whole values, folded by the projector as a replay folds them)
``progress``  published progress only (``data``: as in ``updates``)
============  ================================================================

Updates come in seq order with no gap and no duplicate; ``after_seq`` picks
up where an earlier watcher stopped (``update.seq`` is where it was). A run
that already ended is replayed and the stream ends.

When it ends: after the run's terminal event (completed, failed or
cancelled). A run that parks on an interrupt or sleeps on a timer is only
waiting, so by default the stream keeps following it until it is resumed or
its timer fires and it goes on; with ``until="park"`` the stream also ends
once the run parks (every interrupt of the park is yielded first). Break out
of the loop to stop earlier; nothing needs closing.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from agentlog.errors import ConfigError, UnknownRunError
from agentlog.eventlog._base import EventReader, RunInfo
from agentlog.eventlog.events import (
    Event,
    InterruptRaised,
    ProgressReported,
    RunMigrated,
    RunStarted,
    RunStatus,
    StepCompleted,
    SuperstepCommitted,
    ValuePublished,
    utcnow,
)
from agentlog.projector._fold import apply
from agentlog.projector._reducers import Reducer
from agentlog.projector._snapshots import load_state
from agentlog.projector._state import RunState

__all__ = ["STREAM_MODES", "ReducerSource", "StreamMode", "StreamUntil", "StreamUpdate", "stream"]

#: What a stream yields; see the table in :mod:`agentlog.runtime._stream`.
StreamMode = Literal["events", "updates", "values", "progress"]
STREAM_MODES: tuple[str, ...] = get_args(StreamMode)

#: When a stream ends: at the run's end only, or also when it parks.
StreamUntil = Literal["end", "park"]
_UNTILS: tuple[str, ...] = get_args(StreamUntil)

#: The reducer table to fold ``values`` with, or a function from the run's
#: workflow name to its table (None: the registered reducers).
ReducerSource = Mapping[str, Reducer] | Callable[[str], Mapping[str, Reducer] | None]

#: The events whose fold changes the state's values ("values" mode).
_CHANGES_VALUES = (RunStarted, SuperstepCommitted, RunMigrated)


@dataclass(frozen=True, slots=True)
class StreamUpdate:
    """One live update of a run, as :func:`stream` yields it."""

    mode: StreamMode
    """The mode of the stream that yielded it."""

    seq: int
    """The seq of the event it comes from: pass it as ``after_seq`` to go on later."""

    type: str
    """That event's type, such as ``"StepCompleted"`` or ``"ProgressReported"``."""

    data: Any
    """What the mode yields for that event (see the table in the module docs)."""

    event: Event
    """The recorded event itself (its time, writer epoch, full payload)."""

    step: str = ""
    """The step it concerns, or "" for a run-level event."""

    superstep: int | None = None
    """The superstep of that step (None for a run-level event)."""

    branch: int | None = None
    """The branch of that step inside its superstep (None for a run-level event)."""


def _check_options(mode: str, until: str, after_seq: int) -> None:
    """Raise ConfigError for a stream mode or end condition that does not exist."""
    if mode not in STREAM_MODES:
        raise ConfigError(f"stream mode must be one of {', '.join(STREAM_MODES)}, got {mode!r}")
    if until not in _UNTILS:
        raise ConfigError(f"stream until must be one of {', '.join(_UNTILS)}, got {until!r}")
    if not isinstance(after_seq, int) or isinstance(after_seq, bool) or after_seq < 0:
        raise ConfigError(f"after_seq must be a whole number, 0 or more; got {after_seq!r}")


async def stream(
    log: EventReader,
    run_id: str,
    *,
    mode: StreamMode = "updates",
    after_seq: int = 0,
    until: StreamUntil = "end",
    reducers: ReducerSource | None = None,
    poll_seconds: float = 0.05,
) -> AsyncIterator[StreamUpdate]:
    """Follow the run live: yield its updates as they are recorded.

    Args:
        log: the run's event log (any process's; the stream only reads).
        run_id: the run to follow.
        mode: ``"events"``, ``"updates"`` (the default), ``"values"`` or
            ``"progress"``; see the module docs.
        after_seq: yield only what comes after this seq (0: the whole run).
        until: ``"end"`` follows the run until it completes, fails or is
            cancelled, through any number of parks; ``"park"`` also ends
            when the run parks on an interrupt or a timer.
        reducers: the reducer table to fold ``values`` with (a workflow's
            ``reducer_table``), or a function from the run's workflow name
            to it; None means the registered reducers, with "replace" for a
            name not registered, as the CLI folds.
        poll_seconds: how often to look for events written by another process.

    Raises:
        ConfigError: an unknown ``mode`` or ``until``, a negative ``after_seq``,
            or (``values`` mode) an ``after_seq`` past the run's last seq.
        UnknownRunError: nothing was ever recorded for ``run_id`` (a run
            claimed by a live writer that has not written yet is waited for).
        CorruptEventError, RunArchivedError: as :meth:`EventReader.read`.
    """
    _check_options(mode, until, after_seq)
    info = await _first_event(log, run_id, poll_seconds)
    if info.last_seq <= after_seq and _at_rest(info, until):
        return  # nothing after after_seq, and nothing more comes on its own
    table = reducers(info.workflow) if callable(reducers) else reducers
    state: RunState | None = None
    if mode == "values":  # fold from the state at after_seq, as a replay would
        state = RunState()
        if after_seq:
            state = await load_state(log, run_id, at_seq=after_seq, reducers=table)
    async with _closing(log.tail(run_id, after_seq=after_seq, poll_seconds=poll_seconds)) as events:
        async for event in events:
            if state is not None:
                apply(state, event, table)
            update = _update(mode, event, state)
            if update is not None:
                yield update
            parks = until == "park" and isinstance(event.data, InterruptRaised)
            if parks and await _parked(log, event):
                return


@contextlib.asynccontextmanager
async def _closing(events: AsyncIterator[Event]) -> AsyncIterator[AsyncIterator[Event]]:
    """Close the tail when the stream stops early (a break, or a park), not at GC."""
    try:
        yield events
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


def _update(mode: StreamMode, event: Event, state: RunState | None) -> StreamUpdate | None:
    """What ``mode`` yields for ``event`` (None: nothing)."""
    data = event.data
    if mode == "values":
        if state is None or not isinstance(data, _CHANGES_VALUES):
            return None
        # A copy: the fold's reducers grow values in place as the run goes on.
        return _make(mode, event, copy.deepcopy(state.values))
    if mode == "events":
        return _make(mode, event, data.to_dict())
    if isinstance(data, ProgressReported):
        return _make(mode, event, data.data)
    if mode == "progress":
        return None
    if isinstance(data, StepCompleted):
        return _make(mode, event, data.writes)
    if isinstance(data, InterruptRaised):
        return _make(mode, event, data.payload)
    if isinstance(data, ValuePublished):  # ctx.publish
        return _make(mode, event, {data.key: data.value})
    return None


def _make(mode: StreamMode, event: Event, data: Any) -> StreamUpdate:
    payload = event.data
    return StreamUpdate(
        mode,
        event.seq,
        event.type,
        data,
        event,
        step=getattr(payload, "step", ""),
        superstep=getattr(payload, "superstep", None),
        branch=getattr(payload, "branch", None),
    )


async def _first_event(log: EventReader, run_id: str, poll_seconds: float) -> RunInfo:
    """The run's index row once it has an event; UnknownRunError for an unknown run.

    A run just started in ``async`` durability is claimed (its index row and
    lease exist) before its first event is written in the background: while
    that live writer holds it, it is starting, not unknown. An unknown run is
    an error at once, never a wait forever.
    """
    info = await log.find_run(run_id)
    while info is not None and info.last_seq == 0 and info.lease_live(utcnow()):
        await asyncio.sleep(poll_seconds)
        info = await log.find_run(run_id)
    if info is None or info.last_seq == 0:
        raise UnknownRunError(run_id, log.url)
    return info


def _at_rest(info: RunInfo, until: StreamUntil) -> bool:
    """True if the stream ends at the run's status: it ended, or it parked (``until="park"``)."""
    return info.status in RunStatus.TERMINAL or (
        until == "park" and info.status == RunStatus.WAITING
    )


async def _parked(log: EventReader, event: Event) -> bool:
    """True if the run is parked with ``event`` as its last event so far.

    A park records all its interrupts before the run index says "waiting";
    a later seq means more of the park (or the run already went on) follows.
    """
    info = await log.get_run(event.run_id)
    return info.last_seq == event.seq and _at_rest(info, "park")
