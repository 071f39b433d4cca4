"""The root of agentlog's errors and the root of each part's branch.

The branches' own errors live beside this module, one module a branch
(:mod:`agentlog.errors` re-exports them all); the roots stay together so
that each branch imports only what it derives from.
"""

from __future__ import annotations


class AgentlogError(Exception):
    """Root of every error agentlog raises."""

    retryable: bool = False


class ConfigError(AgentlogError):
    """A URL, option or argument that agentlog cannot use."""


class SeqOutOfRangeError(ConfigError):
    """A seq that the run does not have: below 1, or past its last event."""

    def __init__(self, run_id: str, seq: object, last_seq: int) -> None:
        self.run_id, self.seq, self.last_seq = run_id, seq, last_seq
        super().__init__(
            f"run {run_id!r} has no seq {seq!r}: its events are seq 1 to {last_seq}; "
            "pick a seq in that range"
        )


class EventLogError(AgentlogError):
    """An error from the event log or its snapshot store."""


class ReplayError(AgentlogError):
    """Events that cannot be folded into a run state."""


class WorkflowError(AgentlogError):
    """An error raised by the durable runtime."""


class CheckpointError(AgentlogError):
    """An error raised by the LangGraph saver (:mod:`agentlog.langgraph`)."""


class ArchiveError(AgentlogError):
    """An error raised by the archive."""
