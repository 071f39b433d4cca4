"""Moved: the builders ship in :mod:`agentlog.testing`; these names stay for old imports."""

from agentlog.testing import (
    T0 as _T0,
)
from agentlog.testing import (
    ev,
    every_event_type,
    race_in_processes,
    read_all,
    seed,
    started,
)

__all__ = ["_T0", "ev", "every_event_type", "race_in_processes", "read_all", "seed", "started"]
