"""Laws of the row fold (issue 23 item 8): a shortcut, never a second set of rules.

A SQL log's full fold folds ``StepCompleted`` and ``SuperstepCommitted``
straight from their stored maps (:func:`~agentlog.projector._row_fold.fold_rows`)
and decodes the rest. Checked on generated runs, on generated events of
every type, and on rows with one payload mangled (its checksum made to fit,
so that only the payload's own checks can catch it): the state is the one
``fold`` of the decoded events gives, and an error is exactly the one
(type, run, seq and message) of decoding and applying every row one by one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentlog.errors import AgentlogError
from agentlog.eventlog._row_format import event_from_row, event_rows
from agentlog.eventlog.codec import pack, row_checksum
from agentlog.eventlog.events import (
    Event,
    EventData,
    RunStarted,
    StepCompleted,
    SuperstepCommitted,
    TaskCompleted,
)
from agentlog.projector import apply, fold
from agentlog.projector._row_fold import fold_rows
from agentlog.projector._state import RunState
from tests.property.test_codec_laws import any_payload
from tests.property.test_replay_laws import PROPERTY, RUN, as_events, runs

_Outcome = tuple[RunState | None, tuple[Any, ...] | None]


def _rows(events: list[Event]) -> list[tuple[Any, ...]]:
    return [row[1:] for row in event_rows(events, 1, None)]  # as a read selects them


def _outcome(fold_into: Callable[[RunState], None]) -> _Outcome:
    """The state ``fold_into`` leaves, or the error it raised (type, seq, message)."""
    state = RunState()
    try:
        fold_into(state)
    except (AgentlogError, KeyError) as exc:
        return None, (type(exc), getattr(exc, "seq", None), str(exc))
    return state, None


def _one_by_one(rows: list[tuple[Any, ...]]) -> _Outcome:
    def each(state: RunState) -> None:
        for row in rows:
            apply(state, event_from_row(RUN, row, "test", None))

    return _outcome(each)


def _from_rows(rows: list[tuple[Any, ...]]) -> _Outcome:
    return _outcome(lambda state: fold_rows(state, RUN, rows, None, "test", None))


def _refit(row: tuple[Any, ...], payload: bytes) -> tuple[Any, ...]:
    """``row`` holding ``payload``, its checksum made to fit."""
    seq, event_type, ts, schema_v, epoch, _, _ = row
    checksum = row_checksum(RUN, seq, event_type, ts, schema_v, epoch, payload)
    return (seq, event_type, ts, schema_v, epoch, payload, checksum)


@PROPERTY
@given(runs())
def test_folding_rows_equals_folding_the_decoded_events(payloads: list[EventData]) -> None:
    events = as_events(payloads)
    assert _from_rows(_rows(events)) == (fold(events), None)


@PROPERTY
@given(st.lists(any_payload, min_size=1, max_size=10))
def test_any_events_fold_from_rows_or_fail_exactly_as_one_by_one(
    payloads: list[EventData],
) -> None:
    rows = _rows(as_events(payloads))
    assert _from_rows(rows) == _one_by_one(rows)


# A goto or next list that may not be one: names, Send-like maps and numbers.
_branches = st.lists(
    st.one_of(
        st.text(max_size=2),
        st.fixed_dictionaries({"step": st.text(max_size=2)}),
        st.integers(-9, 9),
    ),
    max_size=2,
)

# A StepCompleted, SuperstepCommitted or TaskCompleted map that must not take the shortcut
# as it is: fields of other types, names the class has not, a Send branch.
_odd_fields = st.one_of(
    st.fixed_dictionaries(
        {
            "step": st.one_of(st.text(max_size=3), st.integers(-9, 9), st.none()),
            "superstep": st.one_of(st.integers(-3, 3), st.booleans(), st.text(max_size=2)),
            "branch": st.one_of(st.integers(0, 3), st.booleans(), st.floats()),
            "writes": st.one_of(
                st.dictionaries(st.text(max_size=2), st.integers(-9, 9)),
                st.lists(st.integers(-9, 9)),
            ),
        },
        optional={
            "goto": st.one_of(_branches, st.none()),
            "extra": st.integers(-9, 9),
        },
    ),
    st.fixed_dictionaries(
        {
            "superstep": st.one_of(st.integers(-3, 3), st.booleans()),
            "next": st.one_of(_branches, st.text(max_size=2)),
        },
        optional={"extra": st.integers(-9, 9)},
    ),
    st.fixed_dictionaries(
        {"key": st.one_of(st.text(max_size=2), st.integers(-9, 9))},
        optional={
            "result": st.one_of(st.none(), st.integers(-9, 9), st.text(max_size=2)),
            "duration_ms": st.one_of(st.floats(), st.integers(-9, 9), st.booleans(), st.none()),
            "extra": st.integers(-9, 9),
        },
    ),
    st.integers(-9, 9),
    st.lists(st.integers(-9, 9), max_size=2),
)


@PROPERTY
@given(runs(), st.data())
def test_a_row_of_another_shape_folds_or_fails_exactly_as_one_by_one(
    payloads: list[EventData], data: st.DataObject
) -> None:
    rows = _rows(as_events(payloads))
    at = data.draw(st.integers(0, len(rows) - 1))
    event_type = data.draw(
        st.sampled_from([StepCompleted.type, SuperstepCommitted.type, TaskCompleted.type])
    )
    seq, _, ts, schema_v, epoch, payload, checksum = rows[at]
    rows[at] = _refit(
        (seq, event_type, ts, schema_v, epoch, payload, checksum), pack(data.draw(_odd_fields))
    )
    assert _from_rows(rows) == _one_by_one(rows)


@PROPERTY
@given(runs(), st.data())
def test_a_mangled_payload_fails_exactly_as_one_by_one(
    payloads: list[EventData], data: st.DataObject
) -> None:
    rows = _rows(as_events(payloads))
    at = data.draw(st.integers(0, len(rows) - 1))
    raw = bytearray(rows[at][5])
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    raw = raw[: data.draw(st.integers(0, len(raw)))]
    rows[at] = _refit(rows[at], bytes(raw))
    assert _from_rows(rows) == _one_by_one(rows)


_FULL_STEP = {"step": "s", "superstep": 0, "branch": 0, "writes": {"n": 1}, "goto": ["s"]}
_FULL_COMMIT = {"superstep": 0, "next": ["s"]}


@pytest.mark.parametrize(
    ("event_type", "fields"),
    [
        (kind, {name: full[name] for name in names})
        for kind, full in [
            (StepCompleted.type, _FULL_STEP),
            (SuperstepCommitted.type, _FULL_COMMIT),
        ]
        for size in range(len(full) + 1)
        for names in itertools.combinations(full, size)
    ],
)
def test_a_map_missing_any_fields_folds_or_fails_exactly_as_one_by_one(
    event_type: str, fields: dict[str, Any]
) -> None:
    # every subset of the fields, right values: only the missing names can tell
    rows = _rows(
        [
            Event(RUN, 1, RunStarted("w", "1", {}, "async", "fp", start=["s"])),
            Event(RUN, 2, StepCompleted("s", 0, 0, {"n": 0}, ["s"])),
        ]
    )
    rows.append(_refit((3, event_type, *rows[1][2:]), pack(fields)))
    assert _from_rows(rows) == _one_by_one(rows)
