"""The event log: events, their codec, the EventLog seam and its backends."""

from agentlog.eventlog.base import EventLog, RunInfo, Snapshot
from agentlog.eventlog.codec import decode_event, encode_event, pack, unpack
from agentlog.eventlog.events import (
    EVENT_TYPES,
    SCHEMA_V,
    Event,
    EventData,
    InterruptRaised,
    ResumeReceived,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunMigrated,
    RunStarted,
    RunStatus,
    StepCompleted,
    StepFailed,
    SuperstepCommitted,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
    WriterClaimed,
)
from agentlog.eventlog.memory import MemoryEventLog
from agentlog.eventlog.urls import DEFAULT_LOG_URL, open_log

__all__ = [
    "DEFAULT_LOG_URL",
    "EVENT_TYPES",
    "SCHEMA_V",
    "Event",
    "EventData",
    "EventLog",
    "InterruptRaised",
    "MemoryEventLog",
    "ResumeReceived",
    "RunCancelled",
    "RunCompleted",
    "RunFailed",
    "RunInfo",
    "RunMigrated",
    "RunStarted",
    "RunStatus",
    "Snapshot",
    "StepCompleted",
    "StepFailed",
    "SuperstepCommitted",
    "TaskCompleted",
    "TaskFailed",
    "TaskStarted",
    "WriterClaimed",
    "decode_event",
    "encode_event",
    "open_log",
    "pack",
    "unpack",
]
