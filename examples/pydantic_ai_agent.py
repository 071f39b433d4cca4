"""A durable Pydantic AI agent: its model requests and tool calls are tasks; a refund waits.

``AgentlogAgent`` wraps the agent; each model request and each tool call is an
agentlog task (recorded once, never repeated on resume), the message history
is the run's state, and the ``refund`` tool (``requires_approval=True``) parks
the run on an interrupt with no process waiting. The model here is Pydantic
AI's ``FunctionModel`` planning from the transcript, so the example runs
offline; swap in ``"openai:gpt-5"`` or any model to use a real one.

Run it: ``python examples/pydantic_ai_agent.py`` (needs ``agentlog[pydantic-ai]``).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from pydantic_ai import Agent, DeferredToolRequests, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.messages import ModelMessage, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agentlog.pydantic_ai import AgentlogAgent
from agentlog.runtime import Runtime, current_idempotency_key

REFUNDS: dict[str, int] = {}  # the payment service: one refund per idempotency key


def plan(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A stand-in model: look the order up, then refund it, then answer."""
    done = {
        p.tool_name: p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)
    }
    if "lookup_order" not in done:
        return ModelResponse(parts=[ToolCallPart("lookup_order", {"order": "A-17"})])
    if "refund" not in done:
        return ModelResponse(parts=[ToolCallPart("refund", {"cents": 2599})])
    return ModelResponse(parts=[TextPart(f"Done: {done['refund']}.")])


agent: Agent[None, str | DeferredToolRequests] = Agent(
    FunctionModel(plan), name="support", output_type=[str, DeferredToolRequests]
)


@agent.tool_plain
def lookup_order(order: str) -> str:
    return f"order {order}: kettle, delivered broken"


@agent.tool_plain(requires_approval=True)
def refund(cents: int) -> str:
    REFUNDS.setdefault(current_idempotency_key(), cents)
    return f"refunded {cents} cents"


durable = AgentlogAgent(agent)


async def main(log_url: str) -> str:
    async with await Runtime.open(log_url, workflows=[durable.workflow]) as rt:
        run = await durable.start(rt, "My kettle arrived broken.", run_id="ticket-7")
        await run.wait(timeout=60)
        [ask] = await run.pending()  # the refund waits; no process needs to stay up
        print(f"ticket-7: waiting for approval of {ask.payload['approvals']}")
        await run.resume({call["tool_call_id"]: True for call in ask.payload["approvals"]})
        output = str(await durable.output(rt, "ticket-7", timeout=60))
    print(output)
    print(f"ticket-7: completed; refunds made: {len(REFUNDS)}")
    return output


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    asyncio.run(main(f"sqlite:///{folder / 'pydantic_ai.db'}"))
