"""The LangGraph saver's errors (:mod:`agentlog.langgraph`): a thread another
process wrote, a channel value or stored class the serializer refuses, a
config without a thread id, a checkpoint the thread does not have.
"""

from __future__ import annotations

from agentlog.errors._eventlog import ConflictError, NotSerializableError
from agentlog.errors._root import CheckpointError, ConfigError, EventLogError


class ThreadConflictError(ConflictError):
    """Another process wrote the LangGraph thread since this saver last read it.

    Nothing was written: the thread's history does not fork. The other
    process's checkpoints stand; this saver refuses further writes to the
    thread until LangGraph reads it again (the next ``invoke`` does), and then
    goes on from them.
    """

    def __init__(self, thread_id: str, why: str) -> None:
        EventLogError.__init__(
            self,
            f"thread {thread_id!r}: {why}; nothing was written. Another process writes this "
            "thread: stop writing it here, or invoke the graph again on the thread to "
            "continue from that process's latest checkpoint (one writer per thread).",
        )
        self.run_id, self.thread_id = thread_id, thread_id
        self.expected, self.got = 0, 0


class ChannelNotSerializableError(NotSerializableError):
    """A channel value (or a pending write) that the saver's serializer refuses."""

    def __init__(self, thread_id: str, channel: str, value_type: str, why: str) -> None:
        EventLogError.__init__(
            self,
            f"thread {thread_id!r}: cannot store channel {channel!r}: a {value_type} "
            f"({why}). Nothing of this checkpoint was written. Store builtin values, or "
            "allow its class: AgentlogSaver.from_url(url, allowed=[YourStateClass]) allows "
            "your graph's state class and the classes its fields name; see docs/langgraph.md.",
        )
        self.thread_id, self.path, self.value_type = thread_id, channel, value_type


class ForbiddenTypeError(EventLogError):
    """Stored LangGraph bytes name a class the saver's serializer does not allow.

    Decoding stopped before anything was imported or constructed (the
    attack in CVE-2026-28277 stores such a class path). The bytes stay as
    they are.
    """

    def __init__(self, what: str, where: str = "") -> None:
        at = f" in {where}" if where else ""
        super().__init__(
            f"refused to decode stored bytes{at}: they name {what}, which is not on the "
            "serializer's allow-list, so nothing was imported. If you stored that type "
            "yourself, allow it: AgentlogSaver.from_url(url, allowed=[YourStateClass]) "
            "or StrictSerializer(allowed=[(module, name)]); see docs/langgraph.md."
        )
        self.what, self.where = what, where


class MissingThreadIdError(CheckpointError, ConfigError):
    """A LangGraph config without ``configurable.thread_id``."""

    def __init__(self, method: str) -> None:
        super().__init__(
            f"{method}: the config has no configurable.thread_id; pass "
            '{"configurable": {"thread_id": "..."}} (one thread id per conversation).'
        )


class UnknownCheckpointError(CheckpointError):
    """A checkpoint_id that the thread (in that namespace) does not have."""

    def __init__(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, doing: str) -> None:
        ns = f" namespace {checkpoint_ns!r}" if checkpoint_ns else ""
        super().__init__(
            f"thread {thread_id!r}{ns} has no checkpoint {checkpoint_id!r} ({doing}); "
            "nothing was written. List its checkpoints with saver.list(config) or "
            "`agentlog show THREAD`, and pass one of those ids (or none for the latest)."
        )
        self.thread_id, self.checkpoint_ns, self.checkpoint_id = (
            thread_id,
            checkpoint_ns,
            checkpoint_id,
        )
