"""Bad input gets a typed error that says what and what to do; nothing recorded is lost."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from agentlog.errors import (
    ChannelNotSerializableError,
    ConflictError,
    MissingThreadIdError,
    ThreadConflictError,
    UnknownCheckpointError,
)
from agentlog.langgraph import AgentlogSaver


def config(thread_id: str, checkpoint_id: str | None = None) -> Any:
    configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def checkpoint(**values: Any) -> Any:
    saved = empty_checkpoint()
    saved["channel_values"] = dict(values)
    saved["channel_versions"] = {k: f"{1:032}.0" for k in values}
    return saved


def put(saver: AgentlogSaver, thread_id: str, parent: str | None = None, **values: Any) -> str:
    saved = checkpoint(**values)
    versions = dict(saved["channel_versions"])
    stored = saver.put(config(thread_id, parent), saved, {"source": "loop", "step": 0}, versions)
    return str(stored["configurable"]["checkpoint_id"])


@pytest.mark.parametrize("bad", [{}, {"configurable": {}}, {"configurable": {"thread_id": ""}}])
def test_a_config_without_thread_id_is_refused_by_name(saver: AgentlogSaver, bad: Any) -> None:
    with pytest.raises(MissingThreadIdError, match=r"configurable\.thread_id"):
        saver.get_tuple(bad)
    with pytest.raises(MissingThreadIdError, match="put: the config has no"):
        saver.put(bad, checkpoint(), {}, {})
    with pytest.raises(MissingThreadIdError):
        saver.put_writes(bad, [("a", 1)], "task")


async def test_async_methods_refuse_a_config_without_thread_id(saver: AgentlogSaver) -> None:
    with pytest.raises(MissingThreadIdError):
        await saver.aget_tuple({"configurable": {}})


def test_a_put_on_a_checkpoint_that_does_not_exist_is_refused(saver: AgentlogSaver) -> None:
    first = put(saver, "t1", a="kept")
    with pytest.raises(UnknownCheckpointError, match="has no checkpoint 'no-such-id'") as caught:
        put(saver, "t1", parent="no-such-id", a="lost?")
    assert caught.value.checkpoint_id == "no-such-id"
    latest = saver.get_tuple(config("t1"))
    assert latest is not None and latest.config["configurable"]["checkpoint_id"] == first
    assert latest.checkpoint["channel_values"] == {"a": "kept"}
    # LangGraph's contract: reading a checkpoint id that is not there is None.
    assert saver.get_tuple(config("t1", "no-such-id")) is None


def test_a_value_the_serializer_cannot_encode_names_its_channel_and_type(
    saver: AgentlogSaver,
) -> None:
    first = put(saver, "t1", a="kept")
    with pytest.raises(ChannelNotSerializableError, match=r"channel 'lock'.*a lock") as caught:
        put(saver, "t1", parent=first, a="next", lock=threading.Lock())
    assert caught.value.path == "lock"
    with pytest.raises(ChannelNotSerializableError, match="channel 'out'"):
        saver.put_writes(config("t1", first), [("out", threading.Lock())], "task-1")
    latest = saver.get_tuple(config("t1"))
    assert latest is not None
    assert latest.config["configurable"]["checkpoint_id"] == first
    assert latest.checkpoint["channel_values"] == {"a": "kept"} and latest.pending_writes == []


def test_a_class_not_on_the_allow_list_is_refused_when_saved(saver: AgentlogSaver) -> None:
    class Custom:
        pass

    from dataclasses import dataclass

    @dataclass
    class Point:
        x: int

    del Custom
    with pytest.raises(ChannelNotSerializableError, match=r"channel 'p'.*Point.*allow"):
        put(saver, "t1", p=Point(1))


def test_a_thread_written_by_another_process_is_a_thread_conflict(log_url: str) -> None:
    with AgentlogSaver.from_url(log_url) as first, AgentlogSaver.from_url(log_url) as second:
        head = put(first, "t1", a=1)
        # The second saver reads the thread, then writes it (claiming it).
        assert second.get_tuple(config("t1")) is not None
        taken = put(second, "t1", parent=head, a=2)
        with pytest.raises(
            ThreadConflictError, match=r"thread 't1'.*nothing was written"
        ) as caught:
            put(first, "t1", parent=head, a=3)
        assert isinstance(caught.value, ConflictError)
        ids = [t.config["configurable"]["checkpoint_id"] for t in second.list(config("t1"))]
        assert ids == [taken, head]  # nothing forked: the loser's checkpoint is not there
        # The loser forgot its stale view: reading again shows the winner's checkpoint.
        latest = first.get_tuple(config("t1"))
        assert latest is not None and latest.checkpoint["channel_values"] == {"a": 2}


def test_a_new_process_continues_a_thread_at_once_after_its_writer_died(log_url: str) -> None:
    dead = AgentlogSaver.from_url(log_url)
    head = put(dead, "t1", a=1)
    # The writer is gone without closing (as after SIGKILL): no lease to wait out.
    with AgentlogSaver.from_url(log_url) as fresh:
        latest = fresh.get_tuple(config("t1"))
        assert latest is not None
        put(fresh, "t1", parent=head, a=2)
        latest = fresh.get_tuple(config("t1"))
        assert latest is not None and latest.checkpoint["channel_values"] == {"a": 2}
    dead.close()
