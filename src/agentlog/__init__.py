"""agentlog: a durable, event-sourced runtime for long-running AI agents."""

from agentlog import errors
from agentlog.errors import AgentlogError
from agentlog.eventlog import Event, EventLog, open_log

__all__ = ["AgentlogError", "Event", "EventLog", "errors", "open_log"]
__version__ = "0.1.0"
