"""The run index row's fold skips quiet events (issue 23, item 9): a shortcut, not a rule.

Most events of a long run are task results; :meth:`RunInfo.after` skips
them with one look-up (``_QUIET``) instead of asking every rule of the row.
These tests hold the skip to those rules: a quiet type has no status of its
own, is no step, is none of the types the fold looks at, and a batch of
quiet events leaves the row as the rules would, its wake-up time included.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentlog.eventlog._records import _DRIVEN, _QUIET, RunInfo
from agentlog.eventlog.events import (
    EVENT_TYPES,
    Event,
    EventData,
    InterruptRaised,
    ProgressReported,
    RunAdmitted,
    RunForked,
    RunStarted,
    RunStatus,
    TaskCompleted,
    TaskFailed,
    ValuePublished,
    status_after_event,
    steps_after,
)

T0 = datetime(2026, 12, 4, tzinfo=UTC)

SAMPLES: dict[str, EventData] = {
    "TaskCompleted": TaskCompleted("k", {"r": 1}),
    "TaskFailed": TaskFailed("k", "ValueError: no"),
    "ProgressReported": ProgressReported("s", 1, 0, {"pct": 50}),
    "ValuePublished": ValuePublished("key", 1, "s", 1, 0, 0),
}


def test_every_quiet_type_has_a_sample() -> None:
    assert set(SAMPLES) == _QUIET
    assert set(EVENT_TYPES) >= _QUIET


@pytest.mark.parametrize("event_type", sorted(_QUIET))
@pytest.mark.parametrize("status", list(RunStatus))
def test_a_quiet_type_changes_nothing_the_rules_look_at(event_type: str, status: str) -> None:
    data = SAMPLES[event_type]
    assert status_after_event(status, data) == status
    assert steps_after(7, event_type) == 7
    assert event_type not in _DRIVEN
    special = (RunAdmitted, InterruptRaised, RunStarted, RunForked)
    assert not isinstance(data, special)


@pytest.mark.parametrize("status", list(RunStatus))
def test_a_batch_of_quiet_events_keeps_the_row_but_its_time_and_seq(status: str) -> None:
    wake = T0 + timedelta(hours=1)
    info = RunInfo("r", "wf", "1", status, last_seq=4, steps=3, started_at=T0, wake_at=wake)
    batch = [
        Event("r", seq, data, T0 + timedelta(seconds=seq))
        for seq, data in enumerate(SAMPLES.values(), start=5)
    ]
    after = info.after(batch)
    assert (after.status, after.steps, after.last_seq) == (status, 3, 8)
    assert after.updated_at == batch[-1].ts
    assert after.wake_at == (wake if status == RunStatus.WAITING else None)
