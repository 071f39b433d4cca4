"""The replay writer: the runtime's own executor, run against a recorded history.

:class:`ReplayWriter` is a :class:`~agentlog.runtime._writer_protocol.Writer`,
as the live :class:`~agentlog.runtime._writer.RunWriter` is, so the executor,
the step contexts and ``@task`` run exactly the code a resume runs. What
differs is where events go and where effects come from:

* every event the code emits is matched against a recorded event of the
  same *lane* (a branch of a superstep, or the run itself) instead of being
  appended; the recorded event is folded into the live state, so the code
  sees what it saw when the history was written. Branches of one superstep
  ran concurrently, so their events interleave in any order: matching is per
  lane, and a lane never reaches past the superstep's commit. Inside a lane,
  tasks run side by side interleave too: their outcomes are matched by task
  key, their calls by call order (:class:`~agentlog.replay._verify_lanes.Lanes`);
* a task's body never runs: :meth:`run_effect` returns the result recorded
  for its key (or raises its recorded error), and ``backoff`` does not wait;
* a recorded failure is retried or given up as it was then: :meth:`emit`
  returns each recorded ``TaskFailed`` and ``StepFailed`` with the verdict the
  history shows, and the runtime follows it. A retry policy asked again about
  an error rebuilt from its recorded text could decide otherwise (a
  ``non_retryable`` class the rebuilt error is not an instance of);
* nothing is written: flush, persist and close do nothing (it holds no log).

A history is a series of *sessions*, one per executor that wrote it: the
code events (:data:`CODE_EVENTS`) one process emitted, up to the next input
(a claim, an answer, a timer, a retry, a migration, a fork, a cancel). A
process that crashed, lost its lease or handed the run over stopped at any
point, and the next writer started again from the state folded up to there,
plus its inputs: the interrupted step runs again from its start, and a task
in flight at the crash is started again under the same key. The replay does
the same: a lane never matches past the next unread input; code that would
go on past it raises :class:`SessionEnds`, the driver checks that the session
left nothing unmatched, folds the inputs, and starts the next session with a
new executor, from the state the live runtime started from.

A difference raises :class:`Diverged` (a BaseException, so no step's
``except Exception`` swallows it); code that goes past the end of an open
run's history raises :class:`HistoryEnds`: that is where a resume would
start doing new work, and everything before it matched.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, cast

from agentlog._logging import get_logger
from agentlog.eventlog.codec import decode_payload, encode_payload
from agentlog.eventlog.events import (
    SCHEMA_V,
    Branch,
    Event,
    EventData,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunMigrated,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
)
from agentlog.projector._fold import apply
from agentlog.projector._state import RunState
from agentlog.replay._verify_compare import (
    Mismatch,
    RecordedTaskError,
    compare,
    describe,
    recorded_error,
)
from agentlog.replay._verify_lanes import CODE_EVENTS, Found, Lanes, extra
from agentlog.runtime._executor import RunExecutor
from agentlog.runtime._failures import workflow_modules
from agentlog.runtime._workflow import Workflow
from agentlog.runtime._writer_protocol import Writer

__all__ = [
    "CODE_EVENTS",
    "Diverged",
    "HistoryEnds",
    "Mismatch",
    "RecordedTaskError",
    "ReplayExecutor",
    "ReplayWriter",
    "SessionEnds",
    "describe",
]

_log = get_logger("agentlog.replay")


class Diverged(BaseException):  # a signal, like CancelledError
    """The code did something other than the history: stops the replay."""

    def __init__(self, mismatch: Mismatch) -> None:
        super().__init__(mismatch.message)
        self.mismatch = mismatch


class HistoryEnds(BaseException):
    """The code reached the end of an open run's history: all before it matched."""


class SessionEnds(BaseException):
    """The code reached an input: the process that wrote this session stopped there."""


class ReplayWriter:
    """A :class:`Writer` that matches emitted events against ``history``; writes nothing."""

    def __init__(self, history: Sequence[Event], workflow: Workflow[Any, Any]) -> None:
        self.state = RunState(run_id=history[0].run_id if history else "")
        self._reducers = workflow.reducer_table
        self.history = list(history)
        self.used = [False] * len(self.history)
        self.cursor = 0  # the first event not yet folded or matched
        self._bound = 0  # see _boundary
        self._lanes = Lanes(self.history)
        #: the workflow's modules: the only ones a recorded error's class is rebuilt from
        self._modules = workflow_modules([s.fn for s in workflow.steps.values()])
        #: The history ends the run: code that goes further diverges (an open
        #: run's history just stops where a resume would go on).
        self.closed = bool(self.history) and isinstance(
            self.history[-1].data, RunCompleted | RunFailed | RunCancelled
        )

    # -- driving: sessions, and the inputs between them ----------------------------

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

    def end_session(self) -> None:
        """The code stopped at the next input (:class:`SessionEnds`): check that it
        did everything the session recorded before it.

        Raises:
            Diverged: a recorded event of the session was never matched.
        """
        boundary = self._boundary()
        for left in range(self.cursor, boundary):
            if self.used[left]:
                continue
            data = self.history[left].data
            task = self.state.tasks.get(getattr(data, "key", ""), {})
            if not (isinstance(data, TaskStarted) and task.get("status") == "started"):
                raise self._unmatched(left, boundary)
            # Started again while in flight: a claim this history lacks (a fork
            # copies none) came first; the live runtime folded this restart too.
            self._fold(left)

    def _unmatched(self, left: int, boundary: int) -> Diverged:
        event, stop = self.history[left], self.history[boundary]
        message = (
            f"the code stopped before {describe(event.data)}, which the history has "
            f"before its {stop.data.type} at seq {stop.seq}"
        )
        return Diverged(Mismatch(event.seq, "step", describe(event.data), None, message))

    def last_migration(self, workflow: Workflow[Any, Any]) -> int | None:
        """The index of the last recorded migration to ``workflow``'s version, if any."""
        found = None
        for index, event in enumerate(self.history):
            data = event.data
            if isinstance(data, RunMigrated) and data.to_version == workflow.version:
                found = index if data.fingerprint in workflow.fingerprints else None
        return found

    def skip_through(self, index: int) -> None:
        """Fold every event up to ``index`` unchecked, in recorded order (as a
        load of the run would): what other code wrote before a migration."""
        for i in range(self.cursor, index + 1):
            if not self.used[i]:
                self._fold(i)

    def leftover(self) -> Event | None:
        """The first recorded code event nothing matched, if any."""
        return next(
            (e for i, e in enumerate(self.history) if not self.used[i] and _is_code(e)), None
        )

    @property
    def last_seq(self) -> int:
        """The history's last seq (0 if empty)."""
        return self.history[-1].seq if self.history else 0

    # -- the Writer surface ----------------------------------------------------------

    def emit(self, data: EventData, *, at: datetime | None = None) -> Event:
        """Match ``data`` against the history and fold the recorded event (at
        its recorded time: ``at`` is not compared).

        Returns:
            The recorded event; a task's failure with the verdict the history
            shows (:meth:`_as_decided`), which the runtime follows.

        Raises:
            Diverged: the recorded lane holds something else.
            SessionEnds: nothing is recorded for it before the next input.
            HistoryEnds: nothing is recorded for it and the run is still open.
        """
        # Compare what a replay would read back: tuples become lists, and so on.
        data = decode_payload(data.type, SCHEMA_V, encode_payload(data), run_id=self.state.run_id)
        index, restarts = self._find(data)
        mismatch = compare(self.history[index].seq, self.history[index].data, data)
        if mismatch is not None:
            raise Diverged(mismatch)
        for restart in restarts:
            self._fold(restart)
        recorded = self._fold(index)
        return self._as_decided(index, recorded) if isinstance(data, TaskFailed) else recorded

    async def run_effect(
        self, key: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """The task's recorded outcome; its body (``fn``) never runs.

        Raises:
            SessionEnds: the task was in flight when the session's process
                stopped (the next session starts it again, same key).
            HistoryEnds: it was in flight where an open run's history stops.
        """
        outcome = self._outcome(key)
        if outcome is None:
            raise SessionEnds if self._boundary() < len(self.history) else HistoryEnds
        if isinstance(outcome, TaskCompleted):
            return outcome.result
        raise recorded_error(outcome, self._modules)

    def upcoming(self, superstep: int, branch: int) -> list[EventData]:
        """The branch's recorded events of this session that no emitted event matched yet."""
        ahead = self._lanes.ahead((superstep, branch), self.used, self.cursor, self._boundary())
        return [self.history[index].data for index in ahead]

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

    # -- matching ---------------------------------------------------------------------

    def _fold(self, index: int) -> Event:
        """Fold recorded event ``index`` (renumbered: lanes may be taken out of order)."""
        self.used[index] = True
        event = dataclasses.replace(self.history[index], seq=self.state.seq + 1)
        apply(self.state, event, self._reducers)
        while self.cursor < len(self.history) and self.used[self.cursor]:
            self.cursor += 1
        return self.history[index]

    def _as_decided(self, index: int, event: Event) -> Event:
        """The task failure recorded at ``index`` with its policy's verdict as the
        history shows it: retried only if recorded retryable *and* tried again
        in the same step attempt of this session. A history written before
        ``TaskFailed.retryable`` existed reads True for every failure; one cut
        by a crash in the backoff ends its session either way. The folded
        event stays the recorded one (the state is what a resume folds)."""
        data = cast(TaskFailed, event.data)
        again = data.retryable and self._lanes.tried_again(index, self._boundary())
        return dataclasses.replace(event, data=dataclasses.replace(data, retryable=again))

    def _boundary(self) -> int:
        """The index of the next unread input: where this session's process stopped
        (``len(history)`` if none). Only moves on: inputs are read in order."""
        while self._bound < len(self.history) and (
            self.used[self._bound] or _is_code(self.history[self._bound])
        ):
            self._bound += 1
        return self._bound

    def _find(self, data: EventData) -> tuple[int, tuple[int, ...]]:
        """The index of the recorded event of this session that ``data`` is, and
        those of the same task's restarts it passes on the way (see :class:`Lanes`:
        by task key and call order within ``data``'s lane).

        A task whose result is matched may have been started again in between,
        under the same key: its process stopped while it ran and the claim
        that followed is not in this history (a fork copies none). The
        restarts are folded with the result, as the live runtime folded them.
        """
        boundary = self._boundary()
        found = self._lanes.find(data, self.used, self.cursor, boundary, self.state.tasks)
        if isinstance(found, Found):
            return found.index, found.restarts
        if found is not None:
            raise Diverged(found)
        if boundary < len(self.history):
            raise SessionEnds
        if not self.closed:
            raise HistoryEnds
        raise Diverged(extra(data, self.last_seq))

    def _outcome(self, key: str) -> TaskCompleted | TaskFailed | None:
        """The first outcome recorded for ``key`` in this session that no event matched yet."""
        for index in range(self.cursor, self._boundary()):
            data = self.history[index].data
            outcome = isinstance(data, TaskCompleted | TaskFailed) and not self.used[index]
            if outcome and data.key == key:  # type: ignore[attr-defined]
                return data  # type: ignore[return-value]
        return None


class ReplayExecutor(RunExecutor):
    """The runtime's executor, except that each branch of a superstep runs until
    it stops on its own: one branch reaching the end of its session (or of the
    history) must not cut short a sibling whose recorded events still come.

    Its log lines retell the recorded run (a step that failed then, a run
    parked then): news to nobody running the check, so they are debug lines
    of ``agentlog.replay``, never warnings that a healthy check would print.
    """

    def __init__(self, writer: Writer, workflow: Workflow[Any, Any]) -> None:
        super().__init__(writer, workflow)
        self._log = _Retold(_log.bind(run_id=writer.state.run_id, replayed=True))

    async def _superstep(self, todo: list[tuple[int, Branch]], *, parallel: bool) -> list[str]:
        if len(todo) < 2:
            return await super()._superstep(todo, parallel=parallel)
        values = self.state.values
        outcomes = await asyncio.gather(
            *(self._branch(b, entry, values, parallel=True) for b, entry in todo),
            return_exceptions=True,
        )
        stops = [o for o in outcomes if isinstance(o, BaseException)]
        if stops:
            raise min(stops, key=_rank)
        return cast(list[str], outcomes)


class _Retold:
    """A logger whose every level is debug: what the executor says in a replay."""

    def __init__(self, log: Any) -> None:
        self._log = log

    def bind(self, **context: Any) -> _Retold:
        return _Retold(self._log.bind(**context))

    def __getattr__(self, level: str) -> Callable[..., Any]:
        return self._log.debug  # type: ignore[no-any-return]


def _rank(stop: BaseException) -> int:
    """Which stop of parallel branches wins: a divergence or an error first,
    then a session's end, then the history's."""
    return 2 if isinstance(stop, HistoryEnds) else 1 if isinstance(stop, SessionEnds) else 0


def _is_code(event: Event) -> bool:
    return isinstance(event.data, CODE_EVENTS)
