"""The signal a step raises to park its run (``ctx.interrupt``, ``sleep``, ``recv``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

__all__ = ["Interrupted"]


class Interrupted(BaseException):
    """Raised by :meth:`StepContext.interrupt` to park the run.

    A BaseException, so that a step's ``except Exception`` does not swallow it.
    """

    def __init__(
        self,
        index: int,
        payload: Any,
        expects: Any,
        due_at: datetime | None = None,
        kind: str = "input",
    ) -> None:
        super().__init__(index, payload)
        self.index, self.payload, self.expects = index, payload, expects
        self.due_at, self.kind = due_at, kind
