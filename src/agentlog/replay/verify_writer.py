"""The replay writer: the runtime's own executor, run against a recorded history.

:class:`ReplayWriter` stands where a :class:`~agentlog.runtime.RunWriter`
stands, so the executor, the step contexts and ``@task`` run exactly the code
a resume runs. What differs is where events go and where effects come from:

* every event the code emits is matched against the next recorded event of
  the same *lane* (a branch of a superstep, or the run itself) instead of
  being appended; the recorded event is folded into the live state, so the
  code sees what it saw when the history was written. Branches of one
  superstep ran concurrently, so their events interleave in any order:
  matching is per lane, and a lane never reaches past the superstep's commit;
* a task's body never runs: :meth:`run_effect` returns the result recorded
  for its key (or raises its recorded error), and ``backoff`` does not wait;
* nothing is written: flush, persist and close do nothing, and an append
  would raise.

A difference raises :class:`Diverged` (a BaseException, so no step's
``except Exception`` swallows it); code that goes past the end of an open
run's history raises :class:`HistoryEnds`: that is where a resume would
start doing new work, and everything before it matched.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from agentlog.eventlog.base import EventLog
from agentlog.eventlog.codec import decode_payload, encode_payload
from agentlog.eventlog.events import (
    SCHEMA_V,
    Event,
    EventData,
    InterruptRaised,
    ProgressReported,
    RunCancelled,
    RunCompleted,
    RunFailed,
    StepCompleted,
    StepFailed,
    SuperstepCommitted,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
)
from agentlog.projector.fold import apply
from agentlog.projector.snapshots import SnapshotPolicy
from agentlog.projector.state import RunState
from agentlog.runtime.workflow import Workflow
from agentlog.runtime.writer import RunWriter

__all__ = [
    "CODE_EVENTS",
    "Diverged",
    "HistoryEnds",
    "Mismatch",
    "RecordedTaskError",
    "ReplayWriter",
    "describe",
]

#: The events a run's code emits (through the executor); every other event
#: (a start, a claim, an answer, a timer, a retry, a cancel, a migration) is
#: an input from outside, folded in by the replay's driver between sessions.
CODE_EVENTS = (
    TaskStarted,
    TaskCompleted,
    TaskFailed,
    StepCompleted,
    StepFailed,
    InterruptRaised,
    ProgressReported,
    SuperstepCommitted,
    RunCompleted,
    RunFailed,
)
_RUN_LEVEL = (SuperstepCommitted, RunCompleted, RunFailed)
#: Never take any snapshot (the replay saves nothing).
_NO_SNAPSHOTS = SnapshotPolicy(every=2**62, on_park=False)

Lane = tuple[int, int] | None


@dataclasses.dataclass(frozen=True, slots=True)
class Mismatch:
    """What differed, before it is tied to a run (see ``verify.Divergence``)."""

    seq: int
    kind: str
    expected: Any
    got: Any
    message: str


class Diverged(BaseException):  # a signal, like CancelledError
    """The code did something other than the history: stops the replay."""

    def __init__(self, mismatch: Mismatch) -> None:
        super().__init__(mismatch.message)
        self.mismatch = mismatch


class HistoryEnds(BaseException):
    """The code reached the end of an open run's history: all before it matched."""


class RecordedTaskError(Exception):
    """A task's recorded failure, raised again in a replay (when its type is not a builtin)."""


class ReplayWriter(RunWriter):
    """A RunWriter that matches emitted events against ``history``; writes nothing."""

    def __init__(self, history: Sequence[Event], workflow: Workflow[Any]) -> None:
        run_id = history[0].run_id if history else ""
        # No log: nothing here may write (``_append`` raises if anything tries).
        super().__init__(
            cast(EventLog, None),
            RunState(run_id=run_id),
            epoch=0,
            durability="exit",
            snapshots=_NO_SNAPSHOTS,
            reducers=workflow.reducer_table,
        )
        self.history = list(history)
        self.used = [False] * len(self.history)
        self.cursor = 0  # the first event not yet folded or matched
        self._lanes: dict[str, Lane] = {}  # task key -> its lane, from the history
        #: The history ends the run: code that goes further diverges (an open
        #: run's history just stops where a resume would go on).
        self.closed = bool(self.history) and isinstance(
            self.history[-1].data, RunCompleted | RunFailed | RunCancelled
        )

    # -- driving: inputs between sessions ---------------------------------------

    def take_inputs(self) -> None:
        """Fold the inputs at the cursor (a start, claim, answer, retry...) into the state."""
        while self.cursor < len(self.history):
            event = self.history[self.cursor]
            if self.used[self.cursor]:
                self.cursor += 1
            elif isinstance(event.data, CODE_EVENTS):
                return
            else:
                self._fold(self.cursor)

    def leftover(self) -> Event | None:
        """The first recorded code event nothing matched, if any."""
        return next(
            (e for i, e in enumerate(self.history) if not self.used[i] and _is_code(e)), None
        )

    @property
    def last_seq(self) -> int:
        """The history's last seq (0 if empty)."""
        return self.history[-1].seq if self.history else 0

    # -- the RunWriter surface ------------------------------------------------------

    def emit(self, data: EventData) -> Event:
        """Match ``data`` against the history and fold the recorded event.

        Raises:
            Diverged: the recorded lane holds something else.
            HistoryEnds: nothing is recorded for it and the run is still open.
        """
        # Compare what a replay would read back: tuples become lists, and so on.
        data = decode_payload(data.type, SCHEMA_V, encode_payload(data), run_id=self.state.run_id)
        index = self._find(data)
        expected = self.history[index].data
        mismatch = _compare(self.history[index].seq, expected, data)
        if mismatch is not None:
            raise Diverged(mismatch)
        if isinstance(expected, TaskStarted):
            self._lanes[expected.key] = (expected.superstep, expected.branch)
        return self._fold(index)

    async def run_effect(self, key: str, call: Callable[[], Awaitable[Any]]) -> Any:
        """The task's recorded outcome; its body never runs."""
        outcome = self._outcome(key)
        if outcome is None:  # in flight when the history stops: a resume runs it now
            raise HistoryEnds
        if isinstance(outcome, TaskCompleted):
            return outcome.result
        raise _recorded_error(outcome.error)

    async def backoff(self, seconds: float) -> None:
        """A replay does not wait."""

    async def flush(self) -> None:
        """Nothing to write."""

    async def sync_point(self) -> None:
        """Nothing to write."""

    async def persist(self) -> None:
        """Nothing to write."""

    async def confirm_epoch(self) -> None:
        """No writer to fence."""

    def check_live(self) -> None:
        """Always live: no lease."""

    async def close(self) -> None:
        """Nothing to write."""

    def abandon(self) -> None:
        """Nothing buffered."""

    async def _append(self, batch: list[Event]) -> None:
        raise AssertionError("a replay must never append")  # pragma: no cover - a guard

    # -- matching ---------------------------------------------------------------------

    def _fold(self, index: int) -> Event:
        """Fold recorded event ``index`` (renumbered: lanes may be taken out of order)."""
        self.used[index] = True
        event = dataclasses.replace(self.history[index], seq=self.state.seq + 1)
        apply(self.state, event, self._reducers)
        while self.cursor < len(self.history) and self.used[self.cursor]:
            self.cursor += 1
        return self.history[index]

    def _find(self, data: EventData) -> int:
        """The index of the next recorded code event in ``data``'s lane."""
        lane = self._lane_of(data)
        key = getattr(data, "key", None)
        barrier = None
        for index in range(self.cursor, len(self.history)):
            if self.used[index]:
                continue
            event = self.history[index].data
            if not isinstance(event, CODE_EVENTS):
                continue  # an input (a claim after a crash): lanes go on past it
            if self._lane_of(event) == lane:
                # A task tried again after a crash: its recorded result comes later.
                retried = isinstance(event, TaskStarted) and event.key == key
                if retried and isinstance(data, TaskCompleted | TaskFailed):
                    continue
                return index
            if lane is not None and isinstance(event, _RUN_LEVEL):
                barrier = self.history[index].seq  # the superstep committed without it
                break
        if barrier is None and not self.closed:
            raise HistoryEnds
        seq = barrier if barrier is not None else self.last_seq
        raise Diverged(
            Mismatch(
                seq,
                _kind_of(data),
                None,
                describe(data),
                f"the code did {describe(data)}, which the history does not have here",
            )
        )

    def _lane_of(self, data: EventData) -> Lane:
        if isinstance(data, TaskCompleted | TaskFailed):
            return self._lanes.get(data.key)
        if isinstance(data, _RUN_LEVEL):
            return None
        return (data.superstep, data.branch)  # type: ignore[attr-defined]

    def _outcome(self, key: str) -> TaskCompleted | TaskFailed | None:
        """The first outcome recorded for ``key`` that no event matched yet."""
        for index in range(self.cursor, len(self.history)):
            data = self.history[index].data
            outcome = isinstance(data, TaskCompleted | TaskFailed) and not self.used[index]
            if outcome and data.key == key:  # type: ignore[attr-defined]
                return data  # type: ignore[return-value]
        return None


def _is_code(event: Event) -> bool:
    return isinstance(event.data, CODE_EVENTS)


def _compare(seq: int, expected: EventData, got: EventData) -> Mismatch | None:
    """None when ``got`` is what the history recorded at ``seq``; else what differed."""
    if type(expected) is not type(got):
        tasks = isinstance(expected, TaskStarted) or isinstance(got, TaskStarted)
        kind = "task" if tasks else "step"
        return Mismatch(
            seq,
            kind,
            describe(expected),
            describe(got),
            f"the history has {describe(expected)} here; the code did {describe(got)}",
        )
    if isinstance(expected, TaskStarted):
        assert isinstance(got, TaskStarted)
        if (expected.name, expected.key) != (got.name, got.key):
            return Mismatch(
                seq,
                "task",
                describe(expected),
                describe(got),
                f"step {expected.step!r} called {describe(got)} where the history has "
                f"{describe(expected)}",
            )
    elif isinstance(expected, StepCompleted):
        assert isinstance(got, StepCompleted)
        if expected.step != got.step:
            return _step_mismatch(seq, expected.step, got.step)
        if expected.writes != got.writes:
            return Mismatch(
                seq,
                "write",
                expected.writes,
                got.writes,
                f"step {got.step!r} wrote {got.writes!r}; the history has {expected.writes!r}",
            )
        if expected.goto != got.goto:
            return Mismatch(
                seq,
                "step",
                expected.goto,
                got.goto,
                f"step {got.step!r} went to {got.goto!r}; the history went to {expected.goto!r}",
            )
    elif isinstance(expected, StepFailed | InterruptRaised | ProgressReported):
        if expected.step != got.step:  # type: ignore[attr-defined]
            return _step_mismatch(seq, expected.step, got.step)  # type: ignore[attr-defined]
    elif isinstance(expected, SuperstepCommitted):
        assert isinstance(got, SuperstepCommitted)
        if expected.next != got.next:
            return Mismatch(
                seq,
                "step",
                expected.next,
                got.next,
                f"the next steps are {got.next!r}; the history has {expected.next!r}",
            )
    return None


def _step_mismatch(seq: int, expected: str, got: str) -> Mismatch:
    return Mismatch(
        seq, "step", expected, got, f"the code ran step {got!r} where the history ran {expected!r}"
    )


def _kind_of(data: EventData) -> str:
    return "task" if isinstance(data, TaskStarted | TaskCompleted | TaskFailed) else "step"


def describe(data: EventData) -> str:
    """A short name for an event: ``task 'search' (call 0)``, ``step 'plan'``..."""
    if isinstance(data, TaskStarted):
        return f"task {data.name!r} (call {data.call_index})"
    step = getattr(data, "step", None)
    return f"{data.type} of step {step!r}" if step is not None else data.type


def _recorded_error(error: str) -> Exception:
    """The recorded task error, as its builtin type when it names one (so that a
    step's ``except ValueError`` and its retry policy see what they saw then)."""
    name, _, message = error.partition(": ")
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:  # an exotic constructor: the generic error below
            return RecordedTaskError(error)
    return RecordedTaskError(error)
