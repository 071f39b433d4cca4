"""Laws of the run row's delta (issue 23 items 6 and 7): a shortcut, never a second set of rules.

A SQLite append of a step's events writes the run index row as a copy of the
row it knows with three columns set (:func:`row_after_steps`) instead of
building a RunInfo, folding the batch into it and turning it back into a row
(``RunInfo.after`` and ``info_to_row``). Checked on generated sequences of
batches of every event type, with the run-level events that the row's rules
look at drawn with the fields those rules read (a queue, an admission, an
interrupt's due time): after every batch, the row the delta path leaves
(the delta where it applies, else the full rules from the row it left) is
the row of the full rules, column for column; and the same sequences appended
through a SQLite log leave that row in its file.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from agentlog.eventlog._records import RunInfo
from agentlog.eventlog._row_format import (
    RUN_COLUMNS,
    STEP_EVENTS,
    info_from_row,
    info_to_row,
    row_after_steps,
    to_us,
)
from agentlog.eventlog.events import (
    EVENT_TYPES,
    Event,
    EventData,
    InterruptRaised,
    RunAdmitted,
    RunStarted,
    RunStatus,
    StepCompleted,
    TaskStarted,
)
from agentlog.eventlog.sqlite import SqliteEventLog
from tests.property.test_codec_laws import any_payload, aware_datetimes, payloads
from tests.property.test_replay_laws import PROPERTY

RUN = "delta-run"

_started = st.builds(
    RunStarted,
    workflow=st.text(max_size=4),
    version=st.text(max_size=2),
    input=st.none(),
    durability=st.sampled_from(["sync", "exit"]),
    fingerprint=st.just(""),
    limits=st.one_of(
        st.just({}),
        st.fixed_dictionaries(
            {
                "queue": st.fixed_dictionaries(
                    {"name": st.text(max_size=3)}, optional={"priority": st.integers(-3, 3)}
                )
            }
        ),
    ),
)
_interrupt = st.builds(
    InterruptRaised,
    step=st.just("s"),
    superstep=st.integers(0, 3),
    branch=st.just(0),
    index=st.just(0),
    payload=st.none(),
    due_at=st.one_of(st.none(), aware_datetimes),
)
_step = st.sampled_from(sorted(STEP_EVENTS)).flatmap(lambda name: payloads(EVENT_TYPES[name]))
_payload = st.one_of(
    _started,
    _interrupt,
    st.builds(RunAdmitted, queue=st.text(max_size=3)),
    any_payload.filter(lambda data: not isinstance(data, RunStarted | InterruptRaised)),
    _step,
)
# A step's events, more often than their share of every type.
_step_payload = st.one_of(
    st.sampled_from([StepCompleted("s", 0, 0, {}), TaskStarted("k", "t", "s", 0, 0, 0)]), _step
)
# Half the batches a step's alone (the delta's case), half any events.
_batches = st.lists(
    st.one_of(
        st.lists(st.tuples(_step_payload, aware_datetimes), min_size=1, max_size=4),
        st.lists(st.tuples(_payload, aware_datetimes), min_size=1, max_size=4),
    ),
    min_size=1,
    max_size=12,
)


def _events(batches: list[list[tuple[EventData, datetime]]], epoch: int) -> list[list[Event]]:
    out, seq = [], 0
    for batch in batches:
        events = []
        for data, ts in batch:
            seq += 1
            events.append(Event(RUN, seq, data, ts, epoch))
        out.append(events)
    return out


def _full_rows(start: RunInfo, batches: list[list[Event]]) -> list[list[Any]]:
    """The row after each batch by the full rules; a batch they refuse (a
    generated payload no writer makes) rejects the example."""
    rows, info = [], start
    for batch in batches:
        try:
            info = info.after(batch)
            rows.append(info_to_row(info))
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            assume(False)
    return rows


def _delta_rows(start: RunInfo, batches: list[list[Event]]) -> tuple[list[list[Any]], int]:
    """The row after each batch as the SQLite append makes it; and how many
    batches took the delta."""
    rows, row, deltas = [], info_to_row(start), 0
    for batch in batches:
        new = row_after_steps(row, batch, to_us(batch[-1].ts))
        if new is None:
            new = info_to_row(info_from_row(row).after(batch))
        else:
            deltas += 1
        rows.append(row := new)
    return rows, deltas


#: A run's row before the batches: any status, with or without a wake-up time
#: (a row other writes left: a claim, a cancel, an older agentlog's).
_start = st.builds(
    RunInfo,
    run_id=st.just(RUN),
    status=st.sampled_from(list(RunStatus)),
    steps=st.integers(0, 5),
    updated_at=st.one_of(st.none(), aware_datetimes),
    writer_epoch=st.integers(0, 5),
    wake_at=st.one_of(st.none(), aware_datetimes),
    admitted_at=st.one_of(st.none(), aware_datetimes),
)


@PROPERTY
@given(_batches, _start)
def test_the_delta_leaves_the_row_of_the_full_rules(
    batches: list[list[tuple[EventData, datetime]]], start: RunInfo
) -> None:
    events = _events(batches, start.writer_epoch)
    full = _full_rows(start, events)
    delta, _ = _delta_rows(start, events)
    assert delta == full


def test_a_steps_batch_on_a_running_row_takes_the_delta() -> None:
    """The law above is not vacuous: a step's batch skips the full rules."""
    started = Event(RUN, 1, RunStarted("w", "1", None, "sync", ""), writer_epoch=1)
    step = [
        Event(RUN, 2, TaskStarted("k", "t", "s", 0, 0, 0)),
        Event(RUN, 3, StepCompleted("s", 0, 0, {})),
    ]
    row = info_to_row(RunInfo(RUN).after([started]))
    new = row_after_steps(row, step, to_us(step[-1].ts))
    assert new == info_to_row(RunInfo(RUN).after([started]).after(step))
    assert info_from_row(new).steps == 1 and info_from_row(new).status == RunStatus.RUNNING


def _stored_row(path: Path) -> list[Any]:
    with closing(sqlite3.connect(path)) as conn:
        return list(
            conn.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (RUN,)).fetchone()
        )


async def _append_all(
    path: Path, batches: list[list[tuple[EventData, datetime]]]
) -> tuple[RunInfo, list[list[Any]]]:
    """Append the batches through a SQLite log: the row after the claim, and
    the row in the file after each batch."""
    async with SqliteEventLog(path) as log:
        epoch = await log.claim_writer(RUN)
        claimed = await log.find_run(RUN)
        assert claimed is not None
        rows = []
        for batch in _events(batches, epoch):
            await log.append(batch, durable=False)
            rows.append(_stored_row(path))
    return claimed, rows


@PROPERTY
@given(_batches)
def test_a_sqlite_log_stores_the_row_of_the_full_rules(
    batches: list[list[tuple[EventData, datetime]]],
) -> None:
    events = _events(batches, 1)
    _full_rows(RunInfo(RUN, writer_epoch=1), events)  # rejects what the rules refuse
    with tempfile.TemporaryDirectory() as folder:
        claimed, stored = asyncio.run(_append_all(Path(folder) / "log.db", batches))
    assert stored == _full_rows(claimed, _events(batches, claimed.writer_epoch))
