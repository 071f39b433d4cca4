"""A Hypothesis state machine that drives a backend against a plain-Python model.

The model is what the contract promises: per run, a gapless list of events,
the current writer epoch and the newest K snapshots. Every rule does the
same thing to the backend and to the model, and the backend must agree:
the same result, the same error, and nothing written when it raises.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import unittest
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from agentlog.errors import ConflictError, EventLogError, FencedError
from agentlog.eventlog._base import EventLog, EventReader, Snapshot
from agentlog.eventlog.events import Event, TaskCompleted

__all__ = ["MODEL_SETTINGS", "EventLogMachine", "RunModel"]

_T = TypeVar("_T")
_T0 = datetime(2026, 1, 1, tzinfo=UTC)
RUNS = st.sampled_from(["a", "b"])

#: The settings :meth:`EventLogMachine.test_case` applies: no deadline (a
#: durable backend's fsync is slow on a busy machine, and that is no bug).
MODEL_SETTINGS = settings(max_examples=25, stateful_step_count=25, deadline=None)


@dataclass
class RunModel:
    """What the contract promises about one run."""

    events: list[Event] = field(default_factory=list)
    epoch: int = 0
    snapshots: dict[int, bytes] = field(default_factory=dict)


class EventLogMachine(RuleBasedStateMachine):
    """Drives a backend and a plain model with the same calls; they must agree.

    A subclass says which backend in :meth:`open_log`, then takes its test
    case from :meth:`test_case`::

        class SqliteMachine(EventLogMachine):
            async def open_log(self, tmp: Path) -> EventLog:
                return SqliteEventLog(tmp / "model.db", keep_snapshots=self.keep_snapshots)

        TestSqliteModel = SqliteMachine.test_case()
    """

    #: The ``keep_snapshots`` :meth:`open_log` must open the log with.
    keep_snapshots = 2

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.tmp = tempfile.mkdtemp(prefix="agentlog-model-")
        self.log = self.run(self.open_log(Path(self.tmp)))
        self.model: dict[str, RunModel] = {"a": RunModel(), "b": RunModel()}
        self.counter = 0

    async def open_log(self, tmp: Path) -> EventLog:
        """A new, empty log of the backend, whose files (if any) go in ``tmp``."""
        raise NotImplementedError(f"{type(self).__name__} must define open_log()")

    @classmethod
    def test_case(cls, **overrides: Any) -> type[unittest.TestCase]:
        """The unittest TestCase that pytest collects, with :data:`MODEL_SETTINGS`
        (``overrides`` replace some of them: ``max_examples=100``, say)."""
        case = cls.TestCase
        case.settings = settings(MODEL_SETTINGS, **overrides)
        return case

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        self.run(self.log.close())
        self.loop.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def make(self, run_id: str, seq: int, epoch: int) -> Event:
        self.counter += 1
        data = TaskCompleted(key=f"k{self.counter}", result={"n": self.counter})
        return Event(run_id, seq, data, _T0 + timedelta(seconds=self.counter), epoch)

    def expect_refused(self, run_id: str, events: list[Event], error: type[Exception]) -> None:
        with pytest.raises(error):
            self.run(self.log.append(events))

    # -- rules ----------------------------------------------------------------------

    @rule(run_id=RUNS, count=st.integers(1, 3), durable=st.booleans())
    def append_next(self, run_id: str, count: int, durable: bool) -> None:
        model = self.model[run_id]
        first = len(model.events) + 1
        batch = [self.make(run_id, first + i, model.epoch) for i in range(count)]
        self.run(self.log.append(batch, durable=durable))
        model.events.extend(batch)

    @rule(run_id=RUNS, offset=st.sampled_from([-3, -2, -1, 1, 2]))
    def append_wrong_seq(self, run_id: str, offset: int) -> None:
        model = self.model[run_id]
        seq = len(model.events) + 1 + offset
        if seq < 1:
            seq = len(model.events) + 2  # a gap instead
        self.expect_refused(run_id, [self.make(run_id, seq, model.epoch)], ConflictError)

    @rule(run_id=RUNS, lease=st.none() | st.just(60.0))
    def claim(self, run_id: str, lease: float | None) -> None:
        model = self.model[run_id]
        epoch = self.run(self.log.claim_writer(run_id, owner="m", lease_seconds=lease))
        assert epoch == model.epoch + 1
        model.epoch = epoch

    @precondition(lambda self: any(m.epoch > 0 for m in self.model.values()))
    @rule(run_id=RUNS, back=st.integers(1, 3), right_seq=st.booleans())
    def append_with_stale_epoch(self, run_id: str, back: int, right_seq: bool) -> None:
        model = self.model[run_id]
        if model.epoch == 0:
            return
        stale = max(0, model.epoch - back)
        seq = len(model.events) + (1 if right_seq else 5)
        self.expect_refused(run_id, [self.make(run_id, seq, stale)], FencedError)

    @rule(run_id=RUNS, ahead=st.integers(1, 2))
    def append_with_unclaimed_epoch(self, run_id: str, ahead: int) -> None:
        model = self.model[run_id]
        event = self.make(run_id, len(model.events) + 1, model.epoch + ahead)
        self.expect_refused(run_id, [event], EventLogError)

    # Any bytes but a first 0xC1, the mark of a sealed state (msgpack never starts so).
    @rule(
        run_id=RUNS,
        seq=st.integers(1, 12),
        state=st.binary(max_size=16).filter(lambda b: not b.startswith(b"\xc1")),
    )
    def save_snapshot(self, run_id: str, seq: int, state: bytes) -> None:
        # The store does not tie snapshots to recorded seqs: the projector does.
        model = self.model[run_id]
        self.run(self.log.save_snapshot(Snapshot(run_id, seq, state, _T0)))
        model.snapshots[seq] = state
        for old in sorted(model.snapshots)[: -self.keep_snapshots]:
            del model.snapshots[old]

    @rule(run_id=RUNS, at_or_before=st.none() | st.integers(0, 12))
    def load_snapshot(self, run_id: str, at_or_before: int | None) -> None:
        got = self.run(self.log.load_snapshot(run_id, at_or_before=at_or_before))
        model = self.model[run_id].snapshots
        eligible = [s for s in model if at_or_before is None or s <= at_or_before]
        if not eligible:
            assert got is None
        else:
            assert got is not None
            assert (got.seq, got.state) == (max(eligible), model[max(eligible)])

    @rule(run_id=RUNS, after=st.integers(0, 12), span=st.none() | st.integers(0, 12))
    def read_range(self, run_id: str, after: int, span: int | None) -> None:
        model = self.model[run_id]
        if not model.events:
            return
        upto = None if span is None else after + span
        got = self.run(_collect(self.log, run_id, after, upto))
        assert got == [e for e in model.events if e.seq > after and (upto is None or e.seq <= upto)]

    # -- invariants --------------------------------------------------------------------

    @invariant()
    def index_matches_the_model(self) -> None:
        for run_id, model in self.model.items():
            info = self.run(self.log.find_run(run_id))
            if model.epoch == 0 and not model.events:
                assert info is None
                continue
            assert info is not None
            assert (info.last_seq, info.writer_epoch) == (len(model.events), model.epoch)
        listed = {r.run_id for r in self.run(self.log.list_runs())}
        assert listed == {run_id for run_id, m in self.model.items() if m.events}

    @invariant()
    def only_the_newest_snapshots_are_kept(self) -> None:
        for run_id, model in self.model.items():
            if not model.snapshots:
                continue
            oldest = min(model.snapshots)
            assert self.run(self.log.load_snapshot(run_id, at_or_before=oldest - 1)) is None
            got = self.run(self.log.load_snapshot(run_id, at_or_before=oldest))
            assert got is not None and (got.seq, got.state) == (oldest, model.snapshots[oldest])


async def _collect(log: EventReader, run_id: str, after: int, upto: int | None) -> list[Event]:
    return [e async for e in log.read(run_id, after_seq=after, upto_seq=upto)]
