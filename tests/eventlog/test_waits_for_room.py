""":meth:`RunInfo.waits_for_room`: the one rule by which ``agentlog runs``,
``show`` and the UI say a run waits for room in its queue, on every backend.

A queued run (not admitted yet) and a run admitted before that runs again
(it resumed, or its worker died) wait for room while no writer holds a live
lease on them; a run a writer holds, a run of no queue, a parked or ended
run, and a run that a release without the queue drove (no ``RunAdmitted``)
do not. The Kafka worker fleet's case, on the real broker, is
``tests/eventlog/kafka/test_queue_runs.py``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from agentlog.eventlog._base import RunInfo
from agentlog.eventlog.events import RunStatus, utcnow

NOW = utcnow()
LIVE = NOW + timedelta(seconds=30)
ENDED = NOW - timedelta(seconds=1)


def _run(
    status: str, *, queue: str = "emails", admitted: bool = False, lease: datetime | None = None
) -> RunInfo:
    return RunInfo(
        "r",
        workflow="mail",
        status=status,
        last_seq=3,
        queue=queue,
        admitted_at=NOW - timedelta(minutes=1) if admitted else None,
        lease_owner="w" if lease is not None else "",
        lease_expires_at=lease,
    )


@pytest.mark.parametrize(
    ("info", "waits"),
    [
        (_run(RunStatus.QUEUED), True),
        (_run(RunStatus.QUEUED, lease=ENDED), True),
        (_run(RunStatus.QUEUED, lease=LIVE), False),  # a worker is admitting it
        (_run(RunStatus.RUNNING, admitted=True), True),  # resumed, or its worker died
        (_run(RunStatus.RUNNING, admitted=True, lease=ENDED), True),
        (_run(RunStatus.RUNNING, admitted=True, lease=LIVE), False),  # driven
        (_run(RunStatus.RUNNING), False),  # driven without its queue (an older release)
        (_run(RunStatus.RUNNING, queue="", admitted=True), False),  # no queue
        (_run(RunStatus.WAITING, admitted=True), False),  # parked: it needs an answer
        (_run(RunStatus.COMPLETED, admitted=True), False),
    ],
)
def test_the_rule(info: RunInfo, waits: bool) -> None:
    assert info.waits_for_room(NOW) is waits


def test_a_run_with_no_event_does_not_wait() -> None:
    claimed = RunInfo("r", status=RunStatus.QUEUED, queue="emails")
    assert not claimed.waits_for_room(NOW)
