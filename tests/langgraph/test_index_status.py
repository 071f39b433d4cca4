"""A thread parked on an interrupt is ``waiting`` in the run index, and needs no worker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from agentlog.eventlog.events import RunStatus, utcnow
from agentlog.eventlog.sqlite import SqliteEventLog
from agentlog.langgraph import AgentlogSaver


class State(TypedDict, total=False):
    answer: str


def ask(state: State) -> dict[str, Any]:
    return {"answer": interrupt("approve?")}


def graph(saver: AgentlogSaver) -> Any:
    builder = StateGraph(State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=saver)


async def status_of(path: Path, thread_id: str) -> tuple[str, bool]:
    async with SqliteEventLog(path) as event_log:
        info = await event_log.get_run(thread_id)
        return info.status, info.needs_worker(utcnow())


def runs_waiting(url: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "agentlog", "runs", "--log", url, "--status", "waiting", "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [row["run_id"] for row in json.loads(out)]


@pytest.mark.process
async def test_a_thread_parked_on_an_interrupt_is_waiting(tmp_path: Path) -> None:
    path = tmp_path / "agentlog.db"
    url = f"sqlite:///{path}"
    config: Any = {"configurable": {"thread_id": "t1"}}
    for durability in ("sync", "async", "exit"):
        config["configurable"]["thread_id"] = f"t-{durability}"
        async with AgentlogSaver.from_url(url) as saver:
            await graph(saver).ainvoke({}, config, durability=durability)
        assert await status_of(path, f"t-{durability}") == (RunStatus.WAITING, False)
        assert f"t-{durability}" in runs_waiting(url)
        async with AgentlogSaver.from_url(url) as saver:
            done = await graph(saver).ainvoke(Command(resume="yes"), config, durability=durability)
        assert done == {"answer": "yes"}
        if durability == "exit":
            # LangGraph records no resume write in exit durability, and the
            # index cannot tell the resumed run's checkpoint from one its
            # async durability saves after the step's interrupt: still waiting.
            continue
        status, _ = await status_of(path, f"t-{durability}")
        assert status == RunStatus.RUNNING
        assert f"t-{durability}" not in runs_waiting(url)


async def test_no_worker_is_asked_to_drive_a_thread(tmp_path: Path) -> None:
    """A running thread has no lease (its saver holds none): without the rule a
    worker would be handed every thread on every pass and pass it over."""
    path = tmp_path / "agentlog.db"
    config: Any = {"configurable": {"thread_id": "t-running"}}
    async with AgentlogSaver.from_url(f"sqlite:///{path}") as saver:
        await graph(saver).ainvoke({}, config)
        await graph(saver).ainvoke(Command(resume="yes"), config)
    async with SqliteEventLog(path) as event_log:
        info = await event_log.get_run("t-running")
        assert info.status == RunStatus.RUNNING and info.lease_expires_at is None
        assert not info.needs_worker(utcnow())
        assert await event_log.runnable() == []
