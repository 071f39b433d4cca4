"""What the saver hands LangGraph is LangGraph's to change: the saved checkpoint is not.

LangGraph's ``get_state`` applies a checkpoint's pending writes to the
checkpoint it read, updating ``channel_versions`` and ``versions_seen`` in
place. When those were the saver's own dicts, a ``get_state`` before an
``invoke(None)`` marked the pending task as seen, and the thread stopped
with its task never applied (the crash test's resume hit it).
"""

from __future__ import annotations

import copy
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

from agentlog.langgraph import AgentlogSaver
from tests.langgraph.test_bad_input import config


def test_changing_a_read_checkpoint_does_not_change_the_saved_one(saver: AgentlogSaver) -> None:
    saved: Any = empty_checkpoint()
    saved["channel_values"] = {"a": 1}
    saved["channel_versions"] = {"a": f"{1:032}.0"}
    saved["versions_seen"] = {"node": {"a": f"{1:032}.0"}}
    stored = saver.put(
        config("t1"), saved, {"source": "loop", "step": 0, "parents": {}}, {"a": f"{1:032}.0"}
    )
    # The caller goes on updating its own checkpoint after the put.
    saved["channel_versions"]["a"] = "changed by the caller"
    first = saver.get_tuple(stored)
    assert first is not None
    expected = (copy.deepcopy(first.checkpoint), copy.deepcopy(first.metadata))
    assert expected[0]["channel_versions"] == {"a": f"{1:032}.0"}
    first.checkpoint["channel_versions"]["a"] = "changed"
    first.checkpoint["versions_seen"]["node"]["a"] = "changed"
    first.checkpoint["versions_seen"]["other"] = {}
    first.metadata["parents"]["x"] = "changed"
    again = saver.get_tuple(stored)
    assert again is not None
    assert (again.checkpoint, again.metadata) == expected
