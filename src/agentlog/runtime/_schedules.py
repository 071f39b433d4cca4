"""Schedules: start one run of a workflow per cron tick, exactly once across a fleet.

::

    @wf.schedule("0 9 * * 1-5")            # every weekday at 09:00 UTC
    def morning(tick: datetime) -> dict[str, Any]:
        return {"topic": f"news of {tick:%Y-%m-%d}"}

Every worker that knows the workflow walks the ticks up to now and submits
each one's run. The run id is derived from the tick (``<workflow>@<tick>``),
and starting is idempotent on run id, so however many workers see a tick,
and however often, it has one history. A tick missed while no worker ran is
started once when a worker comes back, within the schedule's ``catchup``
window.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from cronsim import CronSim, CronSimError

from agentlog.errors import InvalidScheduleError

__all__ = ["Schedule", "TickInput"]

#: Builds a tick's run input from the tick's time (UTC).
TickInput = Callable[[datetime], dict[str, Any]]

#: At most this many ticks are submitted in one pass, so that a long outage
#: of a fast schedule catches up in bounded steps.
MAX_TICKS_PER_PASS = 1000


@dataclass(frozen=True, slots=True)
class Schedule:
    """One cron schedule of one workflow."""

    workflow: str
    """The workflow a tick starts."""

    cron: str
    """A five-field cron expression, in UTC (``"*/5 * * * *"``)."""

    input: TickInput | dict[str, Any] | None = None
    """The run's input: a dict, or a function of the tick's time."""

    catchup: timedelta = timedelta(days=1)
    """How far back a worker that (re)starts looks for ticks that were missed."""

    def __post_init__(self) -> None:
        try:
            CronSim(self.cron, datetime(2000, 1, 1, tzinfo=UTC))
        except (CronSimError, ValueError, TypeError) as exc:
            raise InvalidScheduleError(
                f"schedule {self.cron!r} of workflow {self.workflow!r} is not a cron "
                f"expression ({exc}); write five fields, minute hour day month weekday, "
                "such as '*/5 * * * *'"
            ) from exc
        if self.catchup < timedelta(0):
            raise InvalidScheduleError(f"catchup must be >= 0, got {self.catchup}")

    def run_id(self, tick: datetime) -> str:
        """The run id of ``tick``: the same in every worker, every time."""
        return f"{self.workflow}@{tick.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"

    def input_for(self, tick: datetime) -> dict[str, Any]:
        """The run input of ``tick``."""
        if callable(self.input):
            return self.input(tick)
        return dict(self.input or {})

    def ticks(self, after: datetime, upto: datetime) -> Iterator[datetime]:
        """The ticks with ``after < tick <= upto``, oldest first (at most
        :data:`MAX_TICKS_PER_PASS`)."""
        for count, tick in enumerate(CronSim(self.cron, after.astimezone(UTC))):
            if tick > upto or count >= MAX_TICKS_PER_PASS:
                return
            yield tick
