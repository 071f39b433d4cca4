"""Windows of a long run's timeline, each built from only the events it needs.

A run page shows at most a few hundred supersteps of a run's
:mod:`~agentlog.replay._timeline`: the latest ones by default, or a window
further back. :class:`TimelineWindows` builds such a window from the slice
of the run's events between two superstep boundaries, never from the whole
run:

* everything a superstep draws (its lanes, task bars and their retries, the
  interrupts raised in it and their answers, failures) is recorded after the
  ``SuperstepCommitted`` that opens it and before the one that closes it: a
  superstep commits only once every branch has finished, so no task,
  interrupt or retry of it is left open across the boundary. Folding the
  slice from the opening commit therefore gives the same blocks and marks as
  folding the run from seq 1 (the tests compare the two, window by window);
* the latest window is found by reading backwards from the run's last seq in
  chunks until the commit that opens its first superstep; its builder is
  kept and extended with the events recorded since, as a live run grows;
* a window further back starts at its superstep's boundary, found from the
  boundaries already known: each chunk read records where each superstep
  begins (an index from superstep to seq that grows as windows are read), and
  a boundary not known yet is probed for where the known ones either side
  place it. Paging back reads about one window of events per page, and a
  jump deep into the run a few chunks more.

What a window cannot know without reading everything is the whole run's
``counts`` other than ``supersteps`` (exact: they are numbered without gaps)
and ``steps`` (the steps finished, which the caller passes from the run's
index row, counted there by the same
:func:`~agentlog.eventlog.events.steps_after`). A window's ``counts``
therefore hold the run's ``supersteps`` and ``steps`` and the window's lanes,
bars and marks, and ``counts_scope`` says so (``"window"``; ``"run"`` when
the window holds the run from its start).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agentlog.eventlog._base import EventReader
from agentlog.eventlog.events import Event, RunStatus, SuperstepCommitted
from agentlog.replay._timeline import TimelineBuilder

__all__ = ["CHUNK", "TimelineWindows", "window_counts"]

#: How many events one read takes while looking for a superstep boundary.
CHUNK = 2_048


class TimelineWindows:
    """Windows of one run's timeline (see the module docstring)."""

    def __init__(self, log: EventReader, run_id: str, *, chunk: int = CHUNK) -> None:
        """Read ``run_id``'s events from ``reader`` (the caller's to close),
        ``chunk`` events a read while looking for a boundary."""
        self._reader, self.run_id, self._chunk = log, run_id, max(1, chunk)
        #: superstep -> the seq of the event that opens it: the run's first
        #: event for superstep 0, the SuperstepCommitted before it otherwise.
        self._opens: dict[int, int] = {0: 1}
        self._origin: datetime | None = None  # the run's first event's time
        self._tail: TimelineBuilder | None = None  # the latest supersteps, kept
        self._tail_first = 0  # the first superstep the tail holds

    async def latest(self, steps: int, last_seq: int, run_steps: int = 0) -> dict[str, Any]:
        """The run's latest ``steps`` supersteps, JSON-ready (``run_steps``:
        the steps the run finished, as its index row counts them)."""
        tail = await self._current_tail(steps, last_seq)
        first = max(0, _top(tail) + 1 - steps)
        if first < self._tail_first:  # a wider window than the kept tail: read it afresh
            self._tail = None
            tail = await self._current_tail(steps, last_seq)
        return self._shown(tail, first, steps, tail, run_steps)

    async def window(
        self, first_step: int, steps: int, last_seq: int, run_steps: int = 0
    ) -> dict[str, Any]:
        """At most ``steps`` supersteps from ``first_step``, JSON-ready."""
        tail = await self._current_tail(steps, last_seq)
        if first_step >= self._tail_first:
            return self._shown(tail, first_step, steps, tail, run_steps)
        opened, start = await self._find_open(first_step)
        events = await self._read_until(start, first_step + steps, tail.timeline.last_seq)
        return self._shown(self._built(opened, events), first_step, steps, tail, run_steps)

    def _shown(
        self,
        built: TimelineBuilder,
        first: int,
        steps: int,
        tail: TimelineBuilder,
        run_steps: int,
    ) -> dict[str, Any]:
        """``built``'s window, with the run's header (from the kept tail) and counts."""
        answer = built.timeline.to_json(first_step=first, max_steps=steps)
        answer.update(tail.timeline.header())
        if built is tail and self._tail_first == 0:
            answer["counts_scope"] = "run"  # the tail holds the run from its start
        else:
            supersteps = _top(tail) + 1 if tail.timeline.steps else 0
            answer["counts"] = window_counts(answer, supersteps, run_steps)
            answer["counts_scope"] = "window"
        return answer

    async def _current_tail(self, steps: int, last_seq: int) -> TimelineBuilder:
        """The kept tail, extended with the events recorded since (built on first use)."""
        if self._tail is None:
            self._tail_first, events = await self._read_back(steps, last_seq)
            self._tail = self._built(self._tail_first, events)
        else:
            for event in await self._read(self._tail.timeline.last_seq, None):
                self._tail.add(event)
        return self._tail

    async def _read_back(self, steps: int, last_seq: int) -> tuple[int, list[Event]]:
        """Read backwards from ``last_seq`` to the boundary of the latest ``steps``
        supersteps; return the first of them and the events from its boundary on."""
        collected: list[Event] = []
        hi, top = last_seq, -1
        while True:
            lo = max(0, hi - self._chunk)
            chunk = await self._read(lo, hi)
            collected[:0] = chunk
            if top < 0:
                top = _last_superstep(chunk)
            first = max(0, top + 1 - steps)
            if lo == 0 or self._opens.get(first, 0) > lo:
                start = self._opens.get(first, 1)
                return first, [e for e in collected if e.seq >= start]
            hi = lo

    async def _find_open(self, superstep: int) -> tuple[int, int]:
        """The superstep at or before ``superstep`` nearest to it whose opening
        seq is known, and that seq.

        Reads a chunk where the boundary should be, by the known boundaries
        either side (supersteps of a run are much alike), and narrows down;
        a probe that lands inside one long superstep falls back to reading
        forwards from the boundary below.
        """
        while superstep not in self._opens:
            below = max(s for s in self._opens if s < superstep)
            above = min((s for s in self._opens if s > superstep), default=None)
            if above is None:
                break
            low, high = self._opens[below], self._opens[above]
            guess = low + (high - low) * (superstep - below) // (above - below)
            after = max(low, min(guess - self._chunk // 2, high - 1 - self._chunk))
            await self._read(after, min(high - 1, after + self._chunk))
            if not any(below < s < above for s in self._opens):
                break  # the probe found no boundary between the two: read on instead
        after = self._opens[max(s for s in self._opens if s <= superstep)]
        while superstep not in self._opens:
            chunk = await self._read(after, after + self._chunk)
            if not chunk:
                break
            after = chunk[-1].seq
        opened = max(s for s in self._opens if s <= superstep)  # itself, unless numbered with gaps
        return opened, self._opens[opened]

    async def _read_until(self, start: int, stop_step: int, limit: int) -> list[Event]:
        """The events from seq ``start`` through the commit that opens
        ``stop_step`` (or through seq ``limit``), read a chunk at a time."""
        if stop_step in self._opens:
            return await self._read(start - 1, min(limit, self._opens[stop_step]))
        events: list[Event] = []
        after = start - 1
        while stop_step not in self._opens and after < limit:
            chunk = await self._read(after, min(limit, after + self._chunk))
            if not chunk:
                break
            events += chunk
            after = chunk[-1].seq
        upto = self._opens.get(stop_step, limit)
        return [e for e in events if e.seq <= upto]

    def _built(self, first: int, events: list[Event]) -> TimelineBuilder:
        """A builder folded from ``events``, the slice that opens superstep ``first``."""
        if first == 0:
            builder = TimelineBuilder()
        else:
            # A superstep commits while the run runs; the offsets stay the run's.
            builder = TimelineBuilder(start=self._origin, status=RunStatus.RUNNING)
        for event in events:
            builder.add(event)
        return builder

    async def _read(self, after: int, upto: int | None) -> list[Event]:
        """Events ``after < seq <= upto``; learns superstep boundaries and the run's start."""
        if self._origin is None and after > 0:
            first = [e async for e in self._reader.read(self.run_id, after_seq=0, upto_seq=1)]
            self._origin = first[0].ts if first else None
        events = [e async for e in self._reader.read(self.run_id, after_seq=after, upto_seq=upto)]
        for event in events:
            if event.seq == 1:
                self._origin = event.ts
            if isinstance(event.data, SuperstepCommitted):
                self._opens.setdefault(event.data.superstep + 1, event.seq)
        return events


def window_counts(answer: dict[str, Any], supersteps: int, steps: int) -> dict[str, int]:
    """The ``counts`` of a window's JSON: the run's ``supersteps`` and
    ``steps`` (finished), and the lanes, bars and marks (of each kind) of
    the supersteps it holds."""
    lanes = [lane for block in answer["steps"] for lane in block["lanes"]]
    found = {
        "steps": steps,
        "supersteps": supersteps,
        "lanes": len(lanes),
        "bars": sum(len(lane["bars"]) for lane in lanes),
        "marks": len(answer["marks"]),
    }
    for mark in answer["marks"]:
        found[mark["kind"]] = found.get(mark["kind"], 0) + 1
    return found


def _last_superstep(events: list[Event]) -> int:
    """The superstep the run reached by the last commit in ``events`` (-1: none)."""
    for event in reversed(events):
        if isinstance(event.data, SuperstepCommitted):
            return event.data.superstep + (1 if event.data.next else 0)
    return -1


def _top(builder: TimelineBuilder) -> int:
    steps = builder.timeline.steps
    return max(steps) if steps else 0
