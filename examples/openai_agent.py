"""An OpenAI Agents SDK agent as a durable agentlog run: tools, a handoff, an approval.

Run it: ``python examples/openai_agent.py`` (a SQLite log in a temporary
folder; needs ``pip install ".[openai-agents]"``). A triage agent looks the
order up with a tool and hands off to a refunds agent, whose refund tool
needs a human's approval: the run parks with no process waiting. Answering
the interrupt (from any process, days later) runs the refund once and
finishes. Every model call and tool call is a recorded task, so the step
replays them instead of calling them again. Then the same agents run as an
``agent_workflow``: one step per agent, the handoff between them.

The model here is a scripted stand-in that implements the SDK's ``Model``
interface, so the example needs no network and no API key; in real use give
each agent ``model="gpt-..."`` (or any SDK ``Model``) instead.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

from agents import (
    Agent,
    Handoff,
    Model,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    Tool,
    Usage,
    function_tool,
)
from agents.agent_output import AgentOutputSchemaBase
from agents.items import TResponseInputItem, TResponseStreamEvent
from agents.testing import assistant_message, function_call

from agentlog.eventlog.events import StepCompleted
from agentlog.openai_agents import agent_workflow, run_agent
from agentlog.runtime import RetryPolicy, Runtime, StepContext, Workflow, end

REFUNDS: dict[str, int] = {}  # the payment service


class ScriptedModel(Model):
    """Answers like a model would, from what the conversation holds so far."""

    def __init__(self, agent: str) -> None:
        self.agent = agent

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any | None,
    ) -> ModelResponse:
        done = _tool_outputs(input)
        if self.agent == "triage" and "lookup" not in done:
            item = function_call("lookup_order", {"order": "42"}, call_id="lookup")
        elif self.agent == "triage":
            item = function_call("transfer_to_refunds", {}, call_id="handoff")
        elif "refund" not in done:
            item = function_call("issue_refund", {"order": "42", "cents": 500}, call_id="refund")
        else:
            item = assistant_message(f"Done: {done['refund']}.", item_id="answer")
        return ModelResponse(output=[item], usage=Usage(requests=1), response_id=None)

    def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("run_agent records whole responses")


def _tool_outputs(input: str | list[TResponseInputItem]) -> dict[str, str]:
    """The tool outputs in the conversation, by call id."""
    items = [] if isinstance(input, str) else [cast(dict[str, Any], item) for item in input]
    return {
        str(item["call_id"]): str(item["output"])
        for item in items
        if item.get("type") == "function_call_output"
    }


@function_tool
def lookup_order(order: str) -> str:
    """Look an order up."""
    return f"order {order}: 2 books, 500 cents"


@function_tool(needs_approval=True)
def issue_refund(order: str, cents: int) -> str:
    """Refund an order: a payment, so a human approves it first."""
    REFUNDS[order] = REFUNDS.get(order, 0) + cents
    return f"refunded {cents} cents on order {order}"


refunds = Agent(
    name="refunds", instructions="Refund orders.", model=ScriptedModel("refunds"),
    tools=[issue_refund],
)  # fmt: skip
triage = Agent(
    name="triage", instructions="Find the order, then hand off.", model=ScriptedModel("triage"),
    tools=[lookup_order], handoffs=[refunds],
)  # fmt: skip

#: the same agents, one step per agent: "triage", then "refunds" after the handoff
per_agent = agent_workflow("refund-agent-steps", triage, model_retry=RetryPolicy(max_attempts=3))

wf = Workflow("refund-agent", version="1", state={"question": "replace", "answer": "replace"})


@wf.step
async def chat(ctx: StepContext) -> Any:
    result = await run_agent(
        ctx, triage, ctx.state["question"], model_retry=RetryPolicy(max_attempts=3)
    )
    return end(answer=str(result.final_output))


async def main(folder: Path) -> None:
    url = f"sqlite:///{folder / 'agentlog.db'}"
    async with await Runtime.open(url, workflows=[wf, per_agent]) as rt:
        await rt.start(wf, run_id="refund-42", input={"question": "Please refund order 42"})
        state = await rt.wait("refund-42")
        [question] = await rt.pending("refund-42")
        print(f"{state.status}: {question.payload}")  # waiting: the refund needs approval
        # ... later, from any process:
        await rt.resume("refund-42", True)
        state = await rt.wait("refund-42")
        print(f"{state.status}: {state.values['answer']}  (refunds made: {REFUNDS})")

        await rt.start(per_agent, run_id="refund-43", input={"input": "Please refund order 42"})
        await rt.wait("refund-43")  # parked on the approval, in step "refunds"
        await rt.resume("refund-43", True)
        state = await rt.wait("refund-43")
        steps = [
            e.data.step async for e in rt.log.read("refund-43") if isinstance(e.data, StepCompleted)
        ]
        print(f"{state.status}: {state.values['output']}  (steps: {steps})")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp())))
