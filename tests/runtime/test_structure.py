"""The runtime is composed, not inherited (issue 22, item 4).

``Runtime`` is a facade over a driver, the requests and a worker; the worker
holds the driver and the log, never the runtime; the live and the replay
writer each implement the one :class:`Writer` protocol, and neither is built
on the other. (The import graph's part, no cycle and no TYPE_CHECKING import
of a higher module, is pinned by ``test_import_graph.py``.)
"""

from __future__ import annotations

import inspect

from agentlog.eventlog.memory import MemoryEventLog
from agentlog.replay._verify_writer import ReplayWriter
from agentlog.runtime import Runtime, Worker
from agentlog.runtime._driver import RunDriver
from agentlog.runtime._requests import RunRequests
from agentlog.runtime._writer import RunWriter
from agentlog.runtime._writer_protocol import Writer


def _members(protocol: type) -> set[str]:
    return {
        name
        for name, value in vars(protocol).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }


async def test_runtime_is_a_facade_over_its_parts() -> None:
    rt = Runtime(MemoryEventLog())
    assert Runtime.__mro__ == (Runtime, object)
    assert isinstance(rt.driver, RunDriver) and isinstance(rt.requests, RunRequests)
    assert rt.worker.driver is rt.driver and rt.worker.log is rt.log
    assert rt.workflows is rt.driver.workflows
    # The worker knows its driver and its log, and nothing that leads back to Runtime.
    assert not any(isinstance(value, Runtime) for value in vars(rt.worker).values())
    assert list(inspect.signature(Worker).parameters)[:2] == ["driver", "log"]


def test_each_writer_implements_the_protocol_on_its_own() -> None:
    assert RunWriter not in ReplayWriter.__mro__ and ReplayWriter not in RunWriter.__mro__
    members = _members(Writer)
    assert {"emit", "flush", "persist", "run_effect", "state"} <= members
    for writer in (RunWriter, ReplayWriter):
        missing = {name for name in members if name not in vars(writer)}
        assert missing == {"state"}, writer  # an attribute of each instance
        for name in members - missing:
            ours = inspect.signature(getattr(writer, name))
            theirs = inspect.signature(getattr(Writer, name))
            assert list(ours.parameters) == list(theirs.parameters), f"{writer.__name__}.{name}"
