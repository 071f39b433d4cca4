"""Which recorded event an emitted one is: by task key and call order, within a lane.

A *lane* is one branch of one superstep (or the run itself, for the events
that commit a superstep or end the run). Inside a lane the order of the
events is only partly the code's:

* a step's task calls start in the order the code makes them, and a step
  attempt ends (:data:`BARRIERS`: its writes, its failure, its interrupt)
  only once every call it made has its outcome recorded: those orders are
  the code's, and a replay must reproduce them;
* but when a step runs calls side by side (``ctx.gather``, a plain
  ``asyncio.gather``), when each one's outcome is recorded depends on how long
  the effect took. In a replay a recorded outcome returns at once, so one
  call runs to its end before its sibling even starts: the same calls, in
  another interleaving. Outcomes, and the retries and restarts of a call
  already made, are therefore matched by their task key (which names the
  step, the branch, the task and its call index), not by position.

What is still checked between calls is what the code decides: a call the
history made *after* another call had finished must not be made before it
(a reordered task), unless the code got there through a call of its own
that was still in flight when the history made it (two pipelines side by
side, each a chain of calls). A call the history lacks is compared with what
the history has there (a renamed or added task); a step that ends while the
history still has a call recorded before its end dropped that call.

:class:`Lanes` only reads: the writer owns the history, which events are
used, and the folding.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Sequence

from agentlog.eventlog.events import (
    Event,
    EventData,
    InterruptRaised,
    MessageReceived,
    ProgressReported,
    RunCompleted,
    RunFailed,
    StepCompleted,
    StepFailed,
    SuperstepCommitted,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
    ValuePublished,
)
from agentlog.replay._verify_compare import Mismatch, compare, describe, kind_of

__all__ = ["BARRIERS", "CODE_EVENTS", "RUN_LEVEL", "Found", "Lane", "Lanes", "extra"]

Lane = tuple[int, int] | None
#: The events a run's code emits (through the executor); every other event
#: (a start, a claim, an answer, a timer, a retry, a cancel, a migration, a
#: fork) is an input from outside, recorded between two sessions.
CODE_EVENTS = (
    TaskStarted,
    TaskCompleted,
    TaskFailed,
    StepCompleted,
    StepFailed,
    InterruptRaised,
    ProgressReported,
    MessageReceived,
    ValuePublished,
    SuperstepCommitted,
    RunCompleted,
    RunFailed,
)
#: The run's own events: they close a superstep, or the run.
RUN_LEVEL = (SuperstepCommitted, RunCompleted, RunFailed)
#: A step attempt's end: recorded after every task call of the attempt settled.
BARRIERS = (StepCompleted, StepFailed, InterruptRaised)
_TASK = (TaskStarted, TaskCompleted, TaskFailed)
_OUTCOME = (TaskCompleted, TaskFailed)


@dataclasses.dataclass(frozen=True, slots=True)
class Found:
    """The recorded event an emitted one is, and the restarts of its task it passes."""

    index: int
    """The recorded event's index in the history (``compare`` says if it differs)."""
    restarts: tuple[int, ...] = ()
    """Earlier starts of the same task key, folded with it (see ``ReplayWriter._find``)."""


class Lanes:
    """The lanes of one history, for :class:`~agentlog.replay._verify_writer.ReplayWriter`."""

    def __init__(self, history: Sequence[Event]) -> None:
        self.history = history
        # task key -> its lane (the key is derived from its superstep and branch)
        self._by_key: dict[str, Lane] = {
            e.data.key: (e.data.superstep, e.data.branch)
            for e in history
            if isinstance(e.data, TaskStarted)
        }

    def lane_of(self, data: EventData) -> Lane:
        """The lane ``data`` belongs to (None: the run's own)."""
        if isinstance(data, _OUTCOME):
            return self._by_key.get(data.key)
        if isinstance(data, RUN_LEVEL):
            return None
        return (data.superstep, data.branch)  # type: ignore[attr-defined]

    def find(
        self,
        data: EventData,
        used: Sequence[bool],
        start: int,
        stop: int,
        known: Container[str],
    ) -> Found | Mismatch | None:
        """The recorded event in ``history[start:stop]`` that ``data`` is.

        Args:
            data: what the code emitted.
            used: which recorded events are matched or folded already.
            start: the first index not yet used.
            stop: the next unread input (the end of this session).
            known: the task keys the state holds so far (calls already made).

        Returns:
            Found (``compare`` still checks it); a Mismatch when the code did
            something else; None when the lane has nothing left before ``stop``.
        """
        lane = self.lane_of(data)
        pending, closed_at = self._pending(lane, used, start, stop)
        if not pending:
            return None if closed_at is None else extra(data, self.history[closed_at].seq)
        if lane is None or isinstance(data, BARRIERS):
            return Found(pending[0])  # in order: every call of the attempt came before
        if isinstance(data, ProgressReported | MessageReceived | ValuePublished):
            return Found(next((i for i in pending if not self._is(i, _TASK)), pending[0]))
        assert isinstance(data, _TASK)
        segment = [i for i in pending if not self._is(i, BARRIERS)]
        if isinstance(data, _OUTCOME):
            found = self._first(segment, _OUTCOME, data.key)
        else:
            found = self._first(segment, (TaskStarted,), data.key)
            if found is not None and data.key not in known:  # a new call: is it in order?
                skipped = self._out_of_order(segment, found, used, known)
                if skipped is not None:
                    return self._differs(skipped, data)
        if found is None:  # a call or an outcome the history lacks here
            new = next((i for i in segment if self._is_new_call(i, known)), None)
            return self._differs(pending[0] if new is None else new, data)
        restarts = tuple(i for i in segment if i < found and self._is(i, (TaskStarted,), data.key))
        return Found(found, restarts if isinstance(data, _OUTCOME) else ())

    def ahead(self, lane: Lane, used: Sequence[bool], start: int, stop: int) -> list[int]:
        """The unused events of ``lane`` in ``[start, stop)`` up to its step
        attempt's end: what the branch recorded that its code has not reached."""
        return self._pending(lane, used, start, stop)[0]

    def tried_again(self, index: int, stop: int) -> bool:
        """Whether the task failure recorded at ``index`` was followed by another
        try of the same task (its key) in the same step attempt, before ``stop``
        (the session's end): that is its retry policy's verdict, as the history
        shows it, for histories recorded before ``TaskFailed.retryable`` too."""
        key = self.history[index].data.key  # type: ignore[attr-defined]
        lane = self._by_key.get(key)
        for later in range(index + 1, stop):
            data = self.history[later].data
            if isinstance(data, BARRIERS) and self.lane_of(data) == lane:
                return False  # the step attempt ended first
            if isinstance(data, TaskStarted) and data.key == key:
                return True
        return False

    def _pending(
        self, lane: Lane, used: Sequence[bool], start: int, stop: int
    ) -> tuple[list[int], int | None]:
        """The unused events of ``lane`` in ``[start, stop)``, up to and including
        the first step-attempt end (the run's lane: only its first event). For a
        branch's lane, none past the run's next event (the superstep's commit),
        whose index is returned too (None: no such event)."""
        pending: list[int] = []
        for index in range(start, stop):
            if used[index]:
                continue
            data = self.history[index].data  # a code event: inputs end the session
            if self.lane_of(data) == lane:
                pending.append(index)
                if lane is None or isinstance(data, BARRIERS):
                    break  # nothing after it can match first
            elif lane is not None and isinstance(data, RUN_LEVEL):
                return pending, index
        return pending, None

    def _out_of_order(
        self, segment: list[int], found: int, used: Sequence[bool], known: Container[str]
    ) -> int | None:
        """The first new call the history made before ``found`` that the code
        skipped for no reason: no call the code already made was in flight
        when the history made it (so the history made it first, in sequence)."""
        for index in segment:
            if index >= found:
                return None
            if self._is_new_call(index, known) and not self._in_flight_at(index, used):
                return index
        return None

    def _in_flight_at(self, index: int, used: Sequence[bool]) -> bool:
        """Whether a call the code already made was still running (its outcome
        not yet recorded) when the history recorded event ``index``."""
        lane = self.lane_of(self.history[index].data)
        for earlier in range(index - 1, -1, -1):
            data = self.history[earlier].data
            if not isinstance(data, CODE_EVENTS) or isinstance(data, RUN_LEVEL):
                return False  # the session's or the superstep's start
            if isinstance(data, BARRIERS) and self.lane_of(data) == lane:
                return False  # the step attempt's start
            mine = isinstance(data, TaskStarted) and used[earlier] and self.lane_of(data) == lane
            if mine and self._outcome_after(earlier) > index:
                return True
        return False

    def _outcome_after(self, index: int) -> int:
        """The index of the first outcome recorded for the task started at ``index``."""
        key = self.history[index].data.key  # type: ignore[attr-defined]
        found = self._first(range(index + 1, len(self.history)), _OUTCOME, key)
        return len(self.history) if found is None else found

    def _first(self, indices: Sequence[int], types: tuple[type, ...], key: str) -> int | None:
        return next((i for i in indices if self._is(i, types, key)), None)

    def _is_new_call(self, index: int, known: Container[str]) -> bool:
        """Whether ``index`` records the first start of a task the state does not know."""
        data = self.history[index].data
        return isinstance(data, TaskStarted) and data.key not in known

    def _is(self, index: int, types: tuple[type, ...], key: str | None = None) -> bool:
        data = self.history[index].data
        return isinstance(data, types) and (key is None or getattr(data, "key", None) == key)

    def _differs(self, index: int, data: EventData) -> Mismatch:
        """What the history has at ``index`` where the code did ``data`` instead."""
        event = self.history[index]
        found = compare(event.seq, event.data, data)
        if found is not None:
            return found
        expected, got = describe(event.data), describe(data)
        message = f"the history has {expected} here; the code did {got}"
        return Mismatch(event.seq, kind_of(data), expected, got, message)


def extra(data: EventData, seq: int) -> Mismatch:
    """The code did ``data``, which the history does not have (at ``seq``)."""
    what = describe(data)
    message = f"the code did {what}, which the history does not have here"
    return Mismatch(seq, kind_of(data), None, what, message)
