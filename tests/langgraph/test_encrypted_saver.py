"""The saver with a key store: sealed at rest, readable with the key, shredded for good."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from agentlog.crypto import LocalKeyStore
from agentlog.errors import ShreddedError
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import WritesSaved, status_after_event
from agentlog.langgraph import AgentlogSaver
from agentlog.runtime import Runtime, RuntimeConfig
from tests.support.shred import CANARY, raw_bytes, sqlite_files


class Chat(TypedDict):
    messages: Annotated[list[str], operator.add]


def _graph(saver: AgentlogSaver) -> Any:
    def reply(state: Chat) -> dict[str, Any]:
        return {"messages": [f"{CANARY}-reply to {len(state['messages'])}"]}

    builder = StateGraph(Chat)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=saver)


async def test_a_thread_is_sealed_at_rest_and_unreadable_once_shredded(tmp_path: Path) -> None:
    db, keyring = tmp_path / "log.db", tmp_path / "keyring.json"
    url = f"sqlite:///{db}"
    config: Any = {"configurable": {"thread_id": "t1"}}
    async with AgentlogSaver.from_url(url, keys=LocalKeyStore(keyring)) as saver:
        await _graph(saver).ainvoke({"messages": [f"{CANARY}-user"]}, config)
    assert CANARY.encode() not in raw_bytes(*sqlite_files(db))

    async with AgentlogSaver.from_url(url, keys=LocalKeyStore(keyring)) as saver:
        found = await saver.aget_tuple(config)
        assert found is not None
        assert found.checkpoint["channel_values"]["messages"][0] == f"{CANARY}-user"

    rt = await Runtime.open(url, config=RuntimeConfig(worker=False), keys=LocalKeyStore(keyring))
    async with rt:
        await rt.shred("t1")

    async with AgentlogSaver.from_url(url, keys=LocalKeyStore(keyring)) as saver:
        with pytest.raises(ShreddedError, match="'t1'"):
            await saver.aget_tuple(config)
    async with await open_log(url, keys=LocalKeyStore(keyring)) as log:
        assert [i.run_id for i in await log.list_runs()] == ["t1"]


def test_a_thread_write_whose_content_is_unreadable_leaves_the_status_as_it_is() -> None:
    """Run indexes rebuilt from events (the archive's) see unreadable writes as None."""
    unreadable = WritesSaved(ns="", checkpoint_id="c1", task_id="x", task_path="", writes=None)  # type: ignore[arg-type]
    assert status_after_event("waiting", unreadable) == "waiting"
