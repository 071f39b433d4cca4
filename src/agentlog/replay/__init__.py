"""Replaying recorded runs under today's code.

* :mod:`agentlog.replay.verify`: the replay check (``agentlog verify``), a
  deploy gate that re-executes histories with no effects and reports where
  the code diverges from them.
"""

from agentlog.replay.verify import (
    Divergence,
    RunCheck,
    VerifyReport,
    verify_history,
    verify_runs,
)

__all__ = ["Divergence", "RunCheck", "VerifyReport", "verify_history", "verify_runs"]
