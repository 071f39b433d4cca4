"""Where one agent segment ends: the first model call of the agent handed off to."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Handoff, Model, ModelResponse, ModelSettings, ModelTracing, Tool
from agents.agent_output import AgentOutputSchemaBase
from agents.items import TResponseInputItem, TResponseStreamEvent
from pydantic_core import to_jsonable_python


class HandedOff(Exception):  # a signal, not an error: the segment is done
    """The run handed off to ``agent``; ``conversation`` is what its model was to be asked.

    The conversation is the SDK's own: the history so far with the handoff's
    call and output, after any ``input_filter`` or nested handoff history,
    as builtin values (what a state key may hold).
    """

    def __init__(self, agent: Agent[Any], conversation: list[Any]) -> None:
        super().__init__(f"handed off to {agent.name!r}")
        self.agent, self.conversation = agent, conversation


class _Boundary(Model):
    """The model of an agent handed off to: asked for its first turn, it stops the run."""

    def __init__(self, agent: Agent[Any]) -> None:
        self._agent = agent

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
        """Never answers.

        Raises:
            HandedOff: always, with the conversation the agent is handed.
        """
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        raise HandedOff(self._agent, to_jsonable_python(items))

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
        """Not used: agentlog runs agents with ``Runner.run``.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError("agentlog.openai_agents runs agents with Runner.run")


def boundary(agent: Agent[Any]) -> Agent[Any]:
    """A stand-in for ``agent`` within another agent's segment.

    It has no tools, handoffs, MCP servers, hooks or instructions of its own,
    so that nothing of ``agent`` runs before its own step: the SDK takes the
    handoff, builds the conversation ``agent`` is handed, and asks this
    copy's model, which raises :class:`HandedOff` with it.
    """
    return agent.clone(
        model=_Boundary(agent),
        instructions=None,
        prompt=None,
        tools=[],
        handoffs=[],
        mcp_servers=[],
        hooks=None,
        input_guardrails=[],
        output_guardrails=[],
    )
