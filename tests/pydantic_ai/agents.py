"""The agents the Pydantic AI tests run: offline models (FunctionModel), counted calls.

Shared by the in-process tests and the SIGKILL worker, so both run the very
same agent. ``CALLS`` counts every model request and tool call this process
made, by kind; the crash worker also reports each to the dedup service.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.messages import ModelMessage, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

#: Every model request and tool call made in this process, by kind.
CALLS: Counter[str] = Counter()

#: Called with (kind, argument) on every model request and tool call, before it answers.
Hook = Callable[[str, str], Awaitable[None]]


def _returns(messages: list[ModelMessage]) -> dict[str, Any]:
    return {
        part.tool_name: part.content
        for message in messages
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    }


def planner(hook: Hook | None = None) -> FunctionModel:
    """A model that looks the order up, checks stock, asks to refund, then answers."""

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = _returns(messages)
        CALLS["model"] += 1
        if hook is not None:
            await hook("model", str(len(done)))
        if "lookup" not in done:
            return ModelResponse(parts=[ToolCallPart("lookup", {"order": "A-17"}, "c1")])
        if "stock" not in done:
            return ModelResponse(parts=[ToolCallPart("stock", {"sku": "kettle"}, "c2")])
        if "refund" not in done:
            return ModelResponse(parts=[ToolCallPart("refund", {"cents": 2599}, "c3")])
        return ModelResponse(parts=[TextPart(f"done: {done['refund']}")])

    return FunctionModel(respond)


def support_agent(hook: Hook | None = None) -> Agent[None, str | DeferredToolRequests]:
    """Three tools; ``refund`` needs a human's approval."""
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        planner(hook), name="support", output_type=[str, DeferredToolRequests]
    )

    async def called(kind: str, arg: str) -> None:
        CALLS[kind] += 1
        if hook is not None:
            await hook(kind, arg)

    @agent.tool_plain
    async def lookup(order: str) -> str:
        await called("lookup", order)
        return f"order {order}: kettle, broken"

    @agent.tool_plain
    async def stock(sku: str) -> dict[str, Any]:
        await called("stock", sku)
        return {"sku": sku, "in_stock": 0}

    @agent.tool_plain(requires_approval=True)
    async def refund(cents: int) -> str:
        await called("refund", str(cents))
        return f"refunded {cents}"

    return agent


async def uninterrupted_output() -> Any:
    """The support agent's output run by Pydantic AI alone, its refund approved."""
    agent = support_agent()
    first = await agent.run("refund my kettle")
    assert isinstance(first.output, DeferredToolRequests)
    approved = DeferredToolResults(
        approvals={call.tool_call_id: True for call in first.output.approvals}
    )
    result = await agent.run(message_history=first.all_messages(), deferred_tool_results=approved)
    return result.output
