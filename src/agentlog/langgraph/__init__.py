"""LangGraph's checkpointer on agentlog: ``agentlog[langgraph]``.

Swap LangGraph's saver for this one and keep the graph as it is::

    from agentlog.langgraph import AgentlogSaver

    with AgentlogSaver.from_url("sqlite:///.agentlog/agentlog.db") as saver:
        graph = builder.compile(checkpointer=saver)
        graph.invoke(inputs, {"configurable": {"thread_id": "t1"}})

``async with AgentlogSaver.from_url(url) as saver`` serves ``ainvoke`` the
same way; any agentlog log URL works (``kafka://host:port/name`` too).

Storage. A thread is one agentlog run (run id = thread id; subgraph
namespaces live inside it). A checkpoint is a ``CheckpointSaved`` event
carrying only the channels whose version changed, and a list that grew by
appending stores only the new items, so bytes grow with the delta, not with
the state. Pending writes are ``WritesSaved`` events. ``agentlog show``,
``state`` and ``diff`` read a thread like any run.

One writer per thread. The first write of a process to a thread goes in
conditional on the seq it read, and then claims the run's writer epoch (a
new thread's first write, at epoch 0, claims nothing); every append names
the seq it expects. A
second process that writes the same thread makes the other one's next write
fail with :class:`~agentlog.errors.ThreadConflictError` (nothing written,
nothing forked). A process that resumes a thread whose writer was killed
continues at once: there is no lease to wait out.

Serialization. Values go through LangGraph's serde protocol; the default is
:class:`StrictSerializer`, which refuses (with
:class:`~agentlog.errors.ForbiddenTypeError`) stored bytes that name any
class not on its allow-list, before importing anything (CVE-2026-28277).
Allowed by default: builtin values (None, bool, int, float, str, bytes,
list, tuple, dict), LangGraph's own safe list and LangChain's agent steps
(:data:`~agentlog.langgraph._serde.DEFAULT_ALLOWED`): datetime, date, time,
timedelta, timezone, UUID, Decimal, set, frozenset, deque, IP addresses,
paths, ZoneInfo, compiled regexes, LangChain messages, documents and
AgentAction/AgentFinish/AgentStep, and LangGraph's Send, Interrupt, Command
and friends. A state class of your own (pydantic or a dataclass) is allowed
by naming it, which allows the classes its fields name too (LangGraph hands
them over itself only under ``LANGGRAPH_STRICT_MSGPACK=true``)::

    AgentlogSaver.from_url(url, allowed=[MyState])
    AgentlogSaver.from_url(url, serde=StrictSerializer(allowed=[MyType]))

A value the serializer cannot store is refused when it is saved, with
:class:`~agentlog.errors.ChannelNotSerializableError` naming the channel and
the type.
"""

from agentlog.langgraph._saver import AgentlogSaver
from agentlog.langgraph._serde import DEFAULT_ALLOWED, StrictSerializer

__all__ = ["DEFAULT_ALLOWED", "AgentlogSaver", "StrictSerializer"]
