"""RetryPolicy: how often a failing step or task is tried, and how long to wait.

The names follow the peers a user already knows (Temporal's activity retry
policy, LangGraph's ``RetryPolicy``): ``max_attempts``, ``initial_interval``,
``backoff_coefficient``, ``max_interval``, ``jitter`` and ``non_retryable``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from agentlog.errors import AgentlogError, WorkflowDefinitionError

__all__ = ["NO_RETRY", "RetryPolicy"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often a failing step or task is tried, and how long to wait between tries."""

    max_attempts: int = 3
    """Total tries, the first included; 1 means no retry."""

    initial_interval: float = 0.2
    """Seconds to wait before the second try."""

    backoff_coefficient: float = 2.0
    """Each further wait is this many times the previous one."""

    max_interval: float = 30.0
    """Upper bound, in seconds, on any one wait."""

    jitter: bool = False
    """Spread each wait at random over 50%-150% of it, so retries of many runs
    do not hit a recovering service at the same instant."""

    non_retryable: tuple[type[BaseException], ...] = ()
    """Exception types that fail at once. agentlog's own errors never retry."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise WorkflowDefinitionError(
                f"max_attempts must be 1 or more, got {self.max_attempts}"
            )
        if self.initial_interval < 0 or self.max_interval < 0 or self.backoff_coefficient < 1:
            raise WorkflowDefinitionError(
                "retry intervals must be >= 0 and backoff_coefficient >= 1, got "
                f"{self.initial_interval}, {self.max_interval}, {self.backoff_coefficient}"
            )

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed try number ``attempt``."""
        wait = min(
            self.initial_interval * self.backoff_coefficient ** (attempt - 1), self.max_interval
        )
        if self.jitter:
            wait *= 0.5 + random.random()
        return float(wait)

    def retries(self, exc: BaseException, attempt: int) -> bool:
        """Whether to try again after ``exc`` ended try number ``attempt``."""
        if isinstance(exc, (AgentlogError, *self.non_retryable)):
            return False
        return attempt < self.max_attempts


#: Fail at the first error.
NO_RETRY = RetryPolicy(max_attempts=1)
