"""Laws of the batch decoder (issue 23 item 8): a shortcut, never a second set of rules.

The read path decodes a batch of stored rows at once where it can
(:func:`~agentlog.eventlog._batch_decode.decode_rows`) and the rest one by
one (:func:`~agentlog.eventlog._row_format.event_from_row`). Checked on
generated events of every type, and on batches with one row mangled (its
checksum made to fit, so that only the payload's own checks can catch it):
the two together give exactly the events, and raise exactly the error
(type, run, seq and message), of decoding every row one by one.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.errors import AgentlogError
from agentlog.eventlog._batch_decode import decode_rows
from agentlog.eventlog._indexed import _verified
from agentlog.eventlog._row_format import event_from_row, event_rows
from agentlog.eventlog.codec import row_checksum
from agentlog.eventlog.events import SCHEMA_V, Event, EventData
from tests.property.test_codec_laws import any_payload, aware_datetimes

FAST = settings(max_examples=80, deadline=None)
_RUN = "run-1"


def _rows(datas: list[EventData], times: list[Any]) -> list[tuple[Any, ...]]:
    events = [
        Event(_RUN, seq, data, ts=ts, writer_epoch=2)
        for seq, (data, ts) in enumerate(zip(datas, times, strict=False), start=1)
    ]
    return [row[1:] for row in event_rows(events, 2, None)]  # as a read selects them


def _one_by_one(rows: list[tuple[Any, ...]]) -> tuple[list[Event], tuple[Any, ...] | None]:
    events: list[Event] = []
    for row in rows:
        try:
            events.append(event_from_row(_RUN, row, "test", None))
        except AgentlogError as exc:
            return events, (type(exc), getattr(exc, "seq", None), str(exc))
    return events, None


def _batch_then_rest(rows: list[tuple[Any, ...]]) -> tuple[list[Event], tuple[Any, ...] | None]:
    fast = decode_rows(_RUN, rows, 1, None)
    rest, error = _one_by_one(rows[len(fast) :])
    return fast + rest, error


@FAST
@given(st.lists(any_payload, min_size=1, max_size=12), st.lists(aware_datetimes, min_size=12))
def test_a_batch_decodes_to_the_same_events_as_one_by_one(
    datas: list[EventData], times: list[Any]
) -> None:
    rows = _rows(datas, times)
    expected, error = _one_by_one(rows)
    assert error is None
    assert _batch_then_rest(rows) == (expected, None)


@FAST
@given(
    st.lists(any_payload, min_size=2, max_size=8),
    st.lists(aware_datetimes, min_size=8),
    st.data(),
)
def test_a_mangled_row_in_a_batch_fails_exactly_as_one_by_one(
    datas: list[EventData], times: list[Any], data: st.DataObject
) -> None:
    rows = _rows(datas, times)
    at = data.draw(st.integers(0, len(rows) - 1))
    seq, event_type, ts, schema_v, epoch, payload, _ = rows[at]
    raw = bytearray(payload)
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    raw = raw[: data.draw(st.integers(0, len(raw)))]
    if data.draw(st.booleans()):
        raw += bytes([data.draw(st.integers(0, 255))])  # trailing bytes, or the next row's start
    mangled = bytes(raw)
    # the checksum made to fit: only the payload's own checks can catch it
    checksum = row_checksum(_RUN, seq, event_type, ts, schema_v, epoch, mangled)
    rows[at] = (seq, event_type, ts, schema_v, epoch, mangled, checksum)
    assert _batch_then_rest(rows) == _one_by_one(rows)


@FAST
@given(st.lists(any_payload, min_size=3, max_size=6), st.lists(aware_datetimes, min_size=6))
def test_the_batch_stops_at_a_gap_a_stale_schema_and_a_bad_checksum(
    datas: list[EventData], times: list[Any]
) -> None:
    rows = _rows(datas, times)
    assert len(decode_rows(_RUN, rows, 2, None)) == 0  # a read after seq 1 sees seq 1: a gap
    seq, event_type, ts, _, epoch, payload, stored = rows[1]
    for bad in [
        (seq, event_type, ts, 0, epoch, payload, stored),  # an older schema version
        (seq, event_type, ts, SCHEMA_V, epoch, payload, stored + 1),  # a checksum that does not fit
        (seq, event_type, float(ts), SCHEMA_V, epoch, payload, stored),  # a column of another type
    ]:
        assert len(decode_rows(_RUN, [rows[0], bad, *rows[2:]], 1, None)) == 1


@FAST
@given(st.lists(any_payload, min_size=2, max_size=6), st.lists(aware_datetimes, min_size=6))
def test_rows_already_verified_are_not_hashed_again(
    datas: list[EventData], times: list[Any]
) -> None:
    """``checked``: a cold read verified the rows' checksums (``_verified``), so
    the decoder trusts them; every other check still stops the batch."""
    rows = _rows(datas, times)
    seq, event_type, ts, schema_v, epoch, payload, stored = rows[1]
    wrong = [rows[0], (seq, event_type, ts, schema_v, epoch, payload, stored + 1), *rows[2:]]
    assert len(decode_rows(_RUN, wrong, 1, None)) == 1
    assert decode_rows(_RUN, wrong, 1, None, checked=True) == decode_rows(_RUN, rows, 1, None)
    stale = [rows[0], (seq, event_type, ts, 0, epoch, payload, stored), *rows[2:]]
    assert len(decode_rows(_RUN, stale, 1, None, checked=True)) == 1


def _checked_one_by_one(rows: list[tuple[Any, ...]], after: int) -> tuple[list[Any], Any]:
    """What ``read_rows`` must hand on: the rows before the first gap or bad
    checksum (payloads as bytes), and that problem's seq and kind."""
    good: list[Any] = []
    for seq, event_type, ts, schema_v, epoch, payload, stored in rows:
        if seq != after + len(good) + 1:
            return good, (after + len(good) + 1, "gap")
        payload = bytes(payload)
        if stored is not None:
            try:
                computed = row_checksum(_RUN, seq, event_type, ts, schema_v, epoch, payload)
            except (TypeError, ValueError, OverflowError):
                return good, (seq, "envelope")
            if computed != stored:
                return good, (seq, "checksum")
        good.append((seq, event_type, ts, schema_v, epoch, payload, stored))
    return good, None


def _kind(problem: Any) -> Any:
    if problem is None or isinstance(problem, tuple):
        return None if problem is None else (problem[0], "gap")
    return (problem.seq, "envelope" if "bad envelope" in str(problem) else "checksum")


@FAST
@given(
    st.lists(any_payload, min_size=1, max_size=8),
    st.lists(aware_datetimes, min_size=8),
    st.data(),
)
def test_read_rows_checks_a_batch_as_row_by_row(
    datas: list[EventData], times: list[Any], data: st.DataObject
) -> None:
    rows = _rows(datas, times)
    if data.draw(st.booleans()):  # one row mangled: a column, the checksum, a seq, a type
        at = data.draw(st.integers(0, len(rows) - 1))
        column = data.draw(st.integers(0, 6))
        row = list(rows[at])
        payloads = [b"", memoryview(b"\x90"), bytearray(b"\xc0")]  # a BLOB column's types
        others = [None, 0, 1, -1, 2**63 - 1, 2**64, "x", "\udc80", 1.5, *payloads]
        row[column] = data.draw(st.sampled_from(payloads if column == 5 else others))
        rows[at] = tuple(row)
    after = data.draw(st.sampled_from([0, 0, 1]))
    good, problem = _verified(_RUN, rows, after, "test")
    expected, expected_problem = _checked_one_by_one(rows, after)
    assert good == expected
    assert all(type(row[5]) is bytes for row in good)
    assert _kind(problem) == expected_problem
