"""AgentlogAgent(stream=True): a model request's stream events reach ``rt.stream``.

Pydantic AI's own FunctionModel streams (``stream_function``); a real SQLite log.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter
from pydantic_ai import Agent, ModelResponse, TextPart
from pydantic_ai.messages import AgentStreamEvent, ModelMessage, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from agentlog.errors import WorkflowDefinitionError
from agentlog.eventlog.events import StepFailed, TaskStarted
from agentlog.pydantic_ai import AgentlogAgent
from agentlog.runtime import Runtime

RUN = "streamed-1"
CHUNKS = ["the kettle ", "is ", "broken"]


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'agentlog.db'}"


class Streamer:
    """A streaming model: a tool call, then the answer in chunks; counts its requests.

    ``gate`` (when set) holds the answer's stream after its first chunk until released.
    """

    def __init__(self, gate: asyncio.Event | None = None) -> None:
        self.gate = gate
        self.requests = 0
        self.tool_calls: Counter[str] = Counter()

    async def stream(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        self.requests += 1
        done = any(
            isinstance(part, ToolReturnPart) for message in messages for part in message.parts
        )
        if not done:
            call = DeltaToolCall(name="lookup", json_args='{"order": "A-17"}', tool_call_id="c1")
            yield {0: call}
            return
        for number, chunk in enumerate(CHUNKS):
            yield chunk
            if number == 0 and self.gate is not None:
                await self.gate.wait()

    def agent(self, fail_lookup_once: bool = False) -> Agent[None, str]:
        agent: Agent[None, str] = Agent(FunctionModel(stream_function=self.stream), name="clerk")

        @agent.tool_plain
        async def lookup(order: str) -> str:
            self.tool_calls["lookup"] += 1
            if fail_lookup_once and self.tool_calls["lookup"] == 1:
                raise ConnectionError("orders service down")
            return f"order {order}: kettle"

        return agent


_EVENTS: TypeAdapter[AgentStreamEvent] = TypeAdapter(AgentStreamEvent)


def _text(items: list[dict[str, Any]]) -> str:
    """The text the streamed events of ``items`` spell, rebuilt as Pydantic AI's events."""
    text = ""
    for item in items:
        for raw in item["events"]:
            event = _EVENTS.validate_python(raw)
            if event.event_kind == "part_start" and event.part.part_kind == "text":
                text += event.part.content
            elif event.event_kind == "part_delta" and event.delta.part_delta_kind == "text":
                text += event.delta.content_delta
    return text


async def _streamed(rt: Runtime, run_id: str) -> list[dict[str, Any]]:
    return [
        update.data
        async for update in rt.stream(run_id, "progress")
        if update.data.get("pydantic_ai") == "stream"
    ]


async def test_stream_events_reach_the_stream_while_the_request_runs(url: str) -> None:
    """The answer's first chunk is on ``rt.stream`` while its model request is still
    running (the model waits after it), and the whole answer is there at the end."""
    gate = asyncio.Event()
    model = Streamer(gate)
    durable = AgentlogAgent(model.agent(), stream=True)
    async with await Runtime.open(url, workflows=[durable.workflow]) as rt:
        await durable.start(rt, "what about my kettle?", run_id=RUN)
        seen = ""
        async with asyncio.timeout(60):
            async for update in rt.stream(RUN, "progress"):
                if update.data.get("pydantic_ai") == "stream":
                    seen += _text([update.data])
                if seen:
                    break
        assert seen == CHUNKS[0] and model.requests == 2  # the answer's request, held
        gate.set()
        assert await durable.output(rt, RUN, timeout=60) == "".join(CHUNKS)
        items = await _streamed(rt, RUN)
    assert _text(items) == "".join(CHUNKS)
    kinds = [raw["event_kind"] for item in items for raw in item["events"]]
    assert kinds.count("part_start") == 2 and "final_result" in kinds  # tool call, text


async def test_a_replayed_request_does_not_stream_again(url: str) -> None:
    """The tool fails once: the step runs again and gets the first model request's recorded
    response back; its events are not published a second time."""
    model = Streamer()
    durable = AgentlogAgent(model.agent(fail_lookup_once=True), stream=True)
    async with await Runtime.open(url, workflows=[durable.workflow]) as rt:
        assert await durable.run(rt, "what about my kettle?", run_id=RUN, timeout=60) == (
            "".join(CHUNKS)
        )
        items = await _streamed(rt, RUN)
    assert model.requests == 2 and model.tool_calls["lookup"] == 2
    tool_starts = [
        raw
        for item in items
        for raw in item["events"]
        if raw["event_kind"] == "part_start" and raw["part"]["part_kind"] == "tool-call"
    ]
    assert len(tool_starts) == 1
    assert _text(items) == "".join(CHUNKS)


async def test_without_stream_nothing_streams(url: str) -> None:
    """The default drives the model's non-streamed request: no stream items."""
    agent: Agent[None, str] = Agent(FunctionModel(lambda m, i: _answer()), name="plain")
    durable = AgentlogAgent(agent)
    async with await Runtime.open(url, workflows=[durable.workflow]) as rt:
        assert await durable.run(rt, "hi", run_id=RUN, timeout=60) == "hello"
        assert await _streamed(rt, RUN) == []


def _answer() -> ModelResponse:
    return ModelResponse(parts=[TextPart("hello")])


def test_a_bad_stream_interval_is_refused() -> None:
    agent: Agent[None, str] = Agent(FunctionModel(lambda m, i: _answer()), name="plain")
    with pytest.raises(WorkflowDefinitionError, match="stream_interval"):
        AgentlogAgent(agent, stream=True, stream_interval=0)


async def test_a_stream_broken_midway_runs_again_under_the_same_key(url: str) -> None:
    """Pydantic AI raises a stream's error to its consumer, so it fails the step (not the
    task's try): the step runs again, the request runs again under the same key, and the
    stream ends with the whole answer (the broken try's events may come before it)."""
    tries: list[int] = []

    async def breaks_once(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        tries.append(1)
        yield CHUNKS[0]
        if len(tries) == 1:
            raise ConnectionError("stream dropped")
        for chunk in CHUNKS[1:]:
            yield chunk

    agent: Agent[None, str] = Agent(FunctionModel(stream_function=breaks_once), name="flaky")
    durable = AgentlogAgent(agent, stream=True)
    async with await Runtime.open(url, workflows=[durable.workflow]) as rt:
        assert await durable.run(rt, "hi", run_id=RUN, timeout=60) == "".join(CHUNKS)
        items = await _streamed(rt, RUN)
        keys = [e.data.key async for e in rt.log.read(RUN) if isinstance(e.data, TaskStarted)]
        failed = [e.data async for e in rt.log.read(RUN) if isinstance(e.data, StepFailed)]
    assert len(tries) == 2 and len(keys) == 2 and len(set(keys)) == 1
    assert len(failed) == 1 and "stream dropped" in failed[0].error
    assert _text(items).endswith("".join(CHUNKS))
