"""A run's timeline: steps in order, parallel branches side by side, tasks as bars.

:func:`build_timeline` folds a run's events into a :class:`Timeline`, the
model the web UI draws and the CLI may print:

* ``steps``: one block per superstep, in order. A block's ``lanes`` are its
  branches (the steps that ran in parallel in that superstep), each with its
  step name, status (``ok``, ``failed``, ``retried``, ``running``,
  ``waiting``), start, end and attempts.
* a lane's ``bars`` are its tasks, one per idempotency key: start, end,
  ``duration_ms`` (the bar's length), status (``ok``, ``failed``,
  ``retried``, ``running``), ``attempts`` and the last error. Tasks that ran
  at the same time within one step get different ``track`` numbers (the lane
  is ``tracks`` rows high), so concurrent tasks sit side by side too.
* ``marks``: failures (``task_failed``, ``step_failed``, ``run_failed``),
  retries (``retry``, ``run_retried``), interrupts (``interrupt``, with when
  it was answered, by whom and how long the run ``waited_ms``), timers
  (``timer``: a sleep or an interrupt's timeout, answered by the clock) and
  ``run_cancelled``; each names its seq, time, superstep, branch and step.

:meth:`Timeline.to_json` gives all of it (or a window of supersteps) as plain dicts, lists, strings,
numbers, booleans and None; times are ISO 8601 text, plus ``offset_ms`` from
the run's first event so a drawing needs no date arithmetic. The model needs
only metadata, which encryption leaves in clear: an encrypted run's timeline
draws without its keys (errors then read as the unreadable mark).

:class:`TimelineBuilder` takes events one at a time, so a live view extends
the timeline with the events after the last one it saw.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agentlog.eventlog.events import (
    Event,
    InterruptRaised,
    MessageSent,
    ResumeReceived,
    RunCancelled,
    RunFailed,
    RunRetried,
    RunStarted,
    StepCompleted,
    StepFailed,
    SuperstepCommitted,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
    TimerFired,
    status_after_event,
    steps_after,
)
from agentlog.projector._state import branch_step, interrupt_key
from agentlog.replay._rows import short, unreadable_mark

__all__ = ["Bar", "Lane", "Mark", "StepBlock", "Timeline", "TimelineBuilder", "build_timeline"]


def _ms(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start).total_seconds() * 1000, 3)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


@dataclass(slots=True)
class Bar:
    """One task (one idempotency key) of a lane, across its attempts."""

    task: str
    key: str
    seq: int
    start: datetime
    end: datetime | None = None
    status: str = "running"
    attempts: int = 1
    failures: int = 0
    error: str | None = None
    track: int = 0


@dataclass(slots=True)
class Mark:
    """Something that happened at one point: a failure, a retry, an interrupt, a timer."""

    kind: str
    seq: int
    ts: datetime
    superstep: int | None = None
    branch: int | None = None
    step: str = ""
    text: str = ""
    id: str = ""
    answered_seq: int | None = None
    answered_at: datetime | None = None
    answered_by: str = ""

    def to_json(self, origin: datetime | None) -> dict[str, Any]:
        """The mark as plain values (``waited_ms`` for an answered interrupt)."""
        return {
            "kind": self.kind,
            "seq": self.seq,
            "ts": _iso(self.ts),
            "offset_ms": _ms(origin, self.ts),
            "superstep": self.superstep,
            "branch": self.branch,
            "step": self.step,
            "text": self.text,
            "id": self.id,
            "answered": self.answered_at is not None,
            "answered_seq": self.answered_seq,
            "answered_at": _iso(self.answered_at),
            "answered_by": self.answered_by,
            "waited_ms": _ms(self.ts, self.answered_at),
        }


@dataclass(slots=True)
class Lane:
    """One branch of a superstep: a step that ran beside the others."""

    branch: int
    step: str
    start: datetime
    end: datetime | None = None
    status: str = "running"
    attempts: int = 1
    failures: int = 0
    bars: list[Bar] = field(default_factory=list)

    def tracks(self) -> int:
        """Place overlapping bars on separate tracks; return how many it takes."""
        ends: list[datetime | None] = []  # per track: when its last bar ended
        for bar in sorted(self.bars, key=lambda b: (b.start, b.seq)):
            for track, end in enumerate(ends):
                if end is not None and end <= bar.start:
                    bar.track, ends[track] = track, bar.end
                    break
            else:
                bar.track = len(ends)
                ends.append(bar.end)
        return max(1, len(ends))

    def to_json(self, origin: datetime | None) -> dict[str, Any]:
        """The lane and its bars as plain values."""
        tracks = self.tracks()
        return {
            "branch": self.branch,
            "step": self.step,
            "status": self.status,
            "start": _iso(self.start),
            "end": _iso(self.end),
            "offset_ms": _ms(origin, self.start),
            "duration_ms": _ms(self.start, self.end),
            "attempts": self.attempts,
            "tracks": tracks,
            "bars": [
                {
                    "task": bar.task,
                    "key": bar.key,
                    "seq": bar.seq,
                    "track": bar.track,
                    "status": bar.status,
                    "attempts": bar.attempts,
                    "error": bar.error,
                    "start": _iso(bar.start),
                    "end": _iso(bar.end),
                    "offset_ms": _ms(origin, bar.start),
                    "duration_ms": _ms(bar.start, bar.end),
                }
                for bar in self.bars
            ],
        }


@dataclass(slots=True)
class StepBlock:
    """One superstep: the branches that ran in parallel, as lanes."""

    superstep: int
    start: datetime
    lanes: dict[int, Lane] = field(default_factory=dict)

    def end(self) -> datetime | None:
        """When its last lane ended (None while one still runs)."""
        ends = [lane.end for lane in self.lanes.values()]
        return None if not ends or None in ends else max(e for e in ends if e is not None)

    def to_json(self, origin: datetime | None) -> dict[str, Any]:
        """The block and its lanes as plain values."""
        end = self.end()
        return {
            "superstep": self.superstep,
            "start": _iso(self.start),
            "end": _iso(end),
            "offset_ms": _ms(origin, self.start),
            "duration_ms": _ms(self.start, end),
            "lanes": [self.lanes[b].to_json(origin) for b in sorted(self.lanes)],
        }


@dataclass(slots=True)
class Timeline:
    """A run's steps, lanes, bars and marks (see the module docstring)."""

    run_id: str = ""
    status: str = ""
    start: datetime | None = None
    end: datetime | None = None
    last_seq: int = 0
    steps: dict[int, StepBlock] = field(default_factory=dict)
    """The supersteps, by number (a superstep runs its branches' steps side by side)."""
    marks: list[Mark] = field(default_factory=list)
    steps_done: int = 0
    """Steps finished in the events folded in, counted by
    :func:`~agentlog.eventlog.events.steps_after` (as the run index counts them)."""

    def counts(self) -> dict[str, int]:
        """How many steps (finished, as the run index counts them), supersteps,
        lanes, bars and marks of each kind."""
        lanes = [lane for block in self.steps.values() for lane in block.lanes.values()]
        found = {
            "steps": self.steps_done,
            "supersteps": len(self.steps),
            "lanes": len(lanes),
            "bars": sum(len(lane.bars) for lane in lanes),
            "marks": len(self.marks),
        }
        for mark in self.marks:
            found[mark.kind] = found.get(mark.kind, 0) + 1
        return found

    def header(self) -> dict[str, Any]:
        """The run as a whole: ``run_id``, ``status``, ``start``, ``end``,
        ``duration_ms`` and ``last_seq`` (the first keys of :meth:`to_json`)."""
        return {
            "run_id": self.run_id,
            "status": self.status,
            "start": _iso(self.start),
            "end": _iso(self.end),
            "duration_ms": _ms(self.start, self.end),
            "last_seq": self.last_seq,
        }

    def to_json(self, *, first_step: int = 0, max_steps: int | None = None) -> dict[str, Any]:
        """The timeline as plain, JSON-ready values: every superstep, or the
        window of at most ``max_steps`` from superstep ``first_step`` with the
        marks made while those supersteps ran (a run's failure, retry or
        cancellation included); ``counts`` is the whole timeline's."""
        origin = self.start
        chosen = [s for s in sorted(self.steps) if s >= first_step]
        if max_steps is not None:
            chosen = chosen[: max(0, max_steps)]
        shown = set(chosen)
        whole = first_step <= 0 and len(chosen) == len(self.steps)
        return {
            **self.header(),
            "steps": [self.steps[s].to_json(origin) for s in chosen],
            "marks": [m.to_json(origin) for m in self.marks if whole or m.superstep in shown],
            "counts": self.counts(),
        }


class TimelineBuilder:
    """Folds events, one at a time, into a :class:`Timeline`."""

    def __init__(self, *, start: datetime | None = None, status: str = "") -> None:
        """A builder from a run's first event (the defaults), or from a later one.

        Args:
            start: the run's first event's time, when the events folded in
                begin later (the offsets stay the run's).
            status: the run's status before the first event folded in.
        """
        self.timeline = Timeline(start=start, status=status)
        self._phase = 0  # the superstep that runs now
        self._bars: dict[str, tuple[Lane, Bar]] = {}
        self._open: dict[str, Mark] = {}  # interrupts raised and not answered yet

    def add(self, event: Event) -> None:
        """Fold the run's next event in."""
        tl, data = self.timeline, event.data
        tl.run_id, tl.last_seq = event.run_id, event.seq
        tl.start = tl.start or event.ts
        tl.end = event.ts
        tl.status = status_after_event(tl.status, data)
        tl.steps_done = steps_after(tl.steps_done, event.type)
        error = unreadable_mark(event) or str(getattr(data, "error", "") or "")
        if isinstance(data, RunStarted):
            self._open_block(0, event.ts, data.start)
        elif isinstance(data, SuperstepCommitted):
            self._phase = data.superstep + 1
            self._open_block(self._phase, event.ts, data.next)
        elif isinstance(data, TaskStarted):
            lane = self._lane(data.superstep, data.branch, data.step, event.ts)
            lane.status = "running"
            found = self._bars.get(data.key)
            if found is None:
                bar = Bar(data.name, data.key, event.seq, event.ts)
                lane.bars.append(bar)
                self._bars[data.key] = (lane, bar)
            else:
                bar = found[1]
                bar.attempts, bar.status, bar.end = max(bar.attempts, data.attempt), "running", None
                text = f"{data.name}: attempt {data.attempt}"
                self._mark("retry", event, data.superstep, data.branch, data.step, text)
        elif isinstance(data, TaskCompleted | TaskFailed) and data.key in self._bars:
            lane, bar = self._bars[data.key]
            bar.end = event.ts
            if isinstance(data, TaskCompleted):
                bar.status = "retried" if bar.failures else "ok"
            else:
                bar.status, bar.failures, bar.error = "failed", bar.failures + 1, error
                text = f"{bar.task}: {error}"
                self._mark("task_failed", event, self._phase_of(lane), lane.branch, lane.step, text)
        elif isinstance(data, StepCompleted):
            lane = self._lane(data.superstep, data.branch, data.step, event.ts)
            lane.end, lane.status = event.ts, "retried" if lane.failures else "ok"
        elif isinstance(data, StepFailed):
            lane = self._lane(data.superstep, data.branch, data.step, event.ts)
            lane.end, lane.status, lane.failures = event.ts, "failed", lane.failures + 1
            lane.attempts = max(lane.attempts, data.attempt)
            text = f"attempt {data.attempt}: {error}"
            self._mark("step_failed", event, data.superstep, data.branch, data.step, text)
        elif isinstance(data, InterruptRaised):
            self._raised(event, data)
        elif isinstance(data, ResumeReceived | TimerFired):
            self._answered(event, data)
        elif isinstance(data, MessageSent) and data.wakes is not None:
            self._answered(event, data)  # the message answers a parked recv
        elif isinstance(data, RunFailed):
            self._mark("run_failed", event, self._phase, None, "", error)
        elif isinstance(data, RunCancelled):
            self._mark("run_cancelled", event, self._phase, None, "", "")
        elif isinstance(data, RunRetried):
            self._mark("run_retried", event, self._phase, None, "", "")
            self._rerun(event.ts)

    def _phase_of(self, lane: Lane) -> int:
        for block in self.timeline.steps.values():
            if block.lanes.get(lane.branch) is lane:
                return block.superstep
        return self._phase

    def _open_block(self, superstep: int, ts: datetime, branches: list[Any]) -> None:
        if not branches:
            return  # the run ends here: no step is next
        block = self.timeline.steps.setdefault(superstep, StepBlock(superstep, ts))
        for branch, target in enumerate(branches):
            block.lanes.setdefault(branch, Lane(branch, branch_step(target), ts))

    def _lane(self, superstep: int, branch: int, step: str, ts: datetime) -> Lane:
        self._phase = max(self._phase, superstep)
        block = self.timeline.steps.setdefault(superstep, StepBlock(superstep, ts))
        lane = block.lanes.setdefault(branch, Lane(branch, step, ts))
        _reopen(lane)
        return lane

    def _mark(
        self,
        kind: str,
        event: Event,
        superstep: int | None,
        branch: int | None,
        step: str,
        text: str,
    ) -> Mark:
        mark = Mark(kind, event.seq, event.ts, superstep, branch, step, text)
        self.timeline.marks.append(mark)
        return mark

    def _raised(self, event: Event, data: InterruptRaised) -> None:
        ident = interrupt_key(data.superstep, data.branch, data.index)
        lane = self._lane(data.superstep, data.branch, data.step, event.ts)
        lane.status = "waiting"
        if ident in self._open:
            return  # raised again as the run parks once more: the same interrupt
        kind = "timer" if data.kind == "timer" else "interrupt"
        text = unreadable_mark(event) or short(data.payload, 120)
        mark = self._mark(kind, event, data.superstep, data.branch, data.step, text)
        mark.id = ident
        self._open[ident] = mark

    def _answered(self, event: Event, data: ResumeReceived | TimerFired | MessageSent) -> None:
        if isinstance(data, TimerFired):
            ids, by = list(data.ids), "timer"
        elif isinstance(data, MessageSent):
            ids, by = [data.wakes or ""], "message"
        elif data.answers is not None:
            ids, by = list(data.answers), "resume"
        else:  # recorded before interrupts had ids: the oldest open one
            ids, by = list(self._open)[:1], "resume"
        for ident in ids:
            mark = self._open.pop(ident, None)
            if mark is not None:
                mark.answered_seq, mark.answered_at, mark.answered_by = event.seq, event.ts, by
        self._rerun(event.ts)

    def _rerun(self, ts: datetime) -> None:
        """The current superstep's unfinished lanes run again (after a resume or a retry)."""
        block = self.timeline.steps.get(self._phase)
        for lane in block.lanes.values() if block else ():
            _reopen(lane)


def _reopen(lane: Lane) -> None:
    """A failed or parked lane that shows life again runs again (its next attempt)."""
    if lane.status == "failed":
        lane.attempts = lane.failures + 1
    if lane.status in ("failed", "waiting"):
        lane.status, lane.end = "running", None


def build_timeline(events: Iterable[Event]) -> Timeline:
    """The :class:`Timeline` of a run's events (in seq order)."""
    builder = TimelineBuilder()
    for event in events:
        builder.add(event)
    return builder.timeline
