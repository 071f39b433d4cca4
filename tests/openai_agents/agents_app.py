"""The agents the OpenAI Agents SDK tests run: a fake model and a support workflow.

A triage agent looks an order up with a tool and hands off to a refunds
agent, whose refund tool needs approval. The fake model implements the SDK's
public ``Model`` interface: its answer depends only on the agent and the
conversation it is given (never on how often it was called), so a new
process answers a resumed run as the first one would have; each call and
each tool call is reported to ``record(kind, idempotency_key)``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from agents import Agent, FunctionTool, Model, ModelResponse, Usage, function_tool
from agents.testing import assistant_message, function_call

from agentlog.openai_agents import agent_workflow, run_agent
from agentlog.runtime import RetryPolicy, StepContext, Workflow, current_idempotency_key, end

Record = Callable[[str, str], None]


class FakeModel(Model):
    """A scripted model: the next turn of ``agent`` given what it has seen."""

    def __init__(self, agent: str, record: Record) -> None:
        self.agent, self.record = agent, record

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.record(f"model:{self.agent}", current_idempotency_key())
        outputs = tool_outputs(input)
        if self.agent == "triage":
            if "call-lookup" not in outputs:
                item = function_call("lookup_order", {"order": "42"}, call_id="call-lookup")
            else:
                item = function_call("transfer_to_refunds", {}, call_id="call-handoff")
        elif "call-refund" not in outputs:
            item = function_call(
                "issue_refund", {"order": "42", "cents": 500}, call_id="call-refund"
            )
        else:
            item = assistant_message(f"done: {outputs['call-refund']}", item_id="msg-final")
        return ModelResponse(output=[item], usage=Usage(requests=1), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the tests run agents with Runner.run")


def tool_outputs(input: Any) -> dict[str, str]:
    """The tool outputs in the conversation so far, by call id."""
    if isinstance(input, str):
        return {}
    found = {}
    for item in input:
        data = item if isinstance(item, dict) else item.model_dump()
        if data.get("type") == "function_call_output":
            found[str(data["call_id"])] = str(data["output"])
    return found


def support_agents(
    record: Record,
    *,
    lookup_timeout: float | None = None,
    before_lookup: Callable[[], Awaitable[None]] | None = None,
) -> Agent[Any]:
    """The triage agent (which hands off to refunds), with fake models.

    ``lookup_timeout`` is the lookup tool's ``timeout_seconds``; the tool
    awaits ``before_lookup()`` (if given) before it answers.
    """

    @function_tool(timeout=lookup_timeout)
    async def lookup_order(order: str) -> str:
        """Look an order up."""
        record("tool:lookup_order", current_idempotency_key())
        if before_lookup is not None:
            await before_lookup()
        return f"order {order}: 2 books"

    @function_tool(needs_approval=True)
    def issue_refund(order: str, cents: int) -> str:
        """Refund part of an order."""
        record("tool:issue_refund", current_idempotency_key())
        return f"refunded {cents} on order {order}"

    refunds = Agent(
        name="refunds",
        instructions="Refund orders.",
        model=FakeModel("refunds", record),
        tools=[issue_refund],
    )
    return Agent(
        name="triage",
        instructions="Find the order, then hand off.",
        model=FakeModel("triage", record),
        tools=[lookup_order],
        handoffs=[refunds],
    )


def tools_of(agent: Agent[Any]) -> list[FunctionTool]:
    """The function tools of ``agent`` (for tests that look at them)."""
    return [tool for tool in agent.tools if isinstance(tool, FunctionTool)]


def support_workflow(record: Record, *, name: str = "oa-support") -> Workflow:
    """One step runs the agents; the answer is the run's output."""
    wf = Workflow(name, version="1", state={"question": "replace", "answer": "replace"})
    agent = support_agents(record)

    @wf.step(retry=RetryPolicy(max_attempts=3, initial_interval=0.01))
    async def chat(ctx: StepContext) -> Any:
        result = await run_agent(ctx, agent, ctx.state["question"])
        return end(answer=str(result.final_output))

    return wf


def support_agent_workflow(record: Record, *, name: str = "oa-segments") -> Workflow:
    """The same agents as a workflow of one step per agent segment: triage, then refunds."""
    retry = RetryPolicy(max_attempts=3, initial_interval=0.01)
    return agent_workflow(name, support_agents(record), retry=retry)


def decode(line: str) -> tuple[str, str]:
    """One ``kind key`` line of a call journal."""
    kind, key = json.loads(line)
    return str(kind), str(key)
