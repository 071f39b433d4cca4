"""Replaying recorded runs: the debugger's data layer and the replay check.

Shared by ``agentlog ui``, ``agentlog show`` and ``agentlog verify``:

* :class:`RunCatalog`: hot and archived runs as one list, paged, filtered
  and counted in the backends.
* :class:`RunHistory`: one run, hot or archived: its events a page at a
  time, its state at any seq, the diff of any event, its timeline.
* :func:`build_timeline`: steps, parallel branches as lanes, tasks as bars,
  failures, retries, interrupts and timers as marks.
* :func:`event_row`: one event as a display row (``agentlog show`` prints these).
* :func:`verify_runs`: the replay check (``agentlog verify``), a deploy gate
  that re-executes histories with no effects and reports where today's code
  diverges from them.

Everything these return for display is JSON-ready: plain dicts, lists,
strings, numbers, booleans and None.
"""

from agentlog.replay._catalog import RunCatalog, RunPage, RunRow
from agentlog.replay._history import RunHistory
from agentlog.replay._rows import event_row, event_rows
from agentlog.replay._timeline import Timeline, TimelineBuilder, build_timeline
from agentlog.replay._verify import (
    Divergence,
    RunCheck,
    VerifyReport,
    verify_history,
    verify_runs,
)

__all__ = [
    "Divergence",
    "RunCatalog",
    "RunCheck",
    "RunHistory",
    "RunPage",
    "RunRow",
    "Timeline",
    "TimelineBuilder",
    "VerifyReport",
    "build_timeline",
    "event_row",
    "event_rows",
    "verify_history",
    "verify_runs",
]
