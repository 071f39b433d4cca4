"""A model whose every call is an agentlog task, so a replay never calls it again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agents import Handoff, Model, ModelResponse, ModelSettings, ModelTracing, Tool
from agents.agent_output import AgentOutputSchemaBase
from agents.items import TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
from agents.usage import deserialize_usage, serialize_usage
from pydantic import TypeAdapter

from agentlog.errors import WorkflowDefinitionError
from agentlog.runtime import RetryPolicy, StepContext

#: the recorded task name of every model call (the agent's name follows a colon)
MODEL_TASK = "openai_agents.model"

_OUTPUT_ITEM: TypeAdapter[TResponseOutputItem] = TypeAdapter(TResponseOutputItem)


class DurableModel(Model):
    """Runs ``inner`` as an agentlog task of the step ``ctx``.

    The task records the model's response as builtin values; a re-executed
    step gets that recorded response back and the model is not called, which
    is what makes the SDK's runner replay a crashed run to the same point.
    """

    def __init__(
        self, ctx: StepContext[Any], inner: Model, agent: str, retry: RetryPolicy | None
    ) -> None:
        self._ctx, self._inner, self._retry = ctx, inner, retry
        self._name = f"{MODEL_TASK}:{agent}"

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
        """The model's response: recorded by the first call, replayed after it."""

        async def call() -> dict[str, Any]:
            response = await self._inner.get_response(
                system_instructions,
                input,
                model_settings,
                tools,
                output_schema,
                handoffs,
                tracing,
                previous_response_id=previous_response_id,
                conversation_id=conversation_id,
                prompt=prompt,
            )
            return _dump(response)

        recorded = await self._ctx.run_task(self._name, call, (), {}, retry=self._retry)
        return _load(recorded)

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
        """Not durable: a stream cannot be replayed token by token.

        Raises:
            WorkflowDefinitionError: always; use ``run_agent`` (``Runner.run``).
        """
        raise WorkflowDefinitionError(
            "agentlog.openai_agents records whole model responses, not streams: run the "
            "agent with agentlog.openai_agents.run_agent, not Runner.run_streamed"
        )

    async def close(self) -> None:
        """Closes the wrapped model."""
        await self._inner.close()


def _dump(response: ModelResponse) -> dict[str, Any]:
    """A model response as builtin values (what a task may record)."""
    return {
        "output": [item.model_dump(mode="json", exclude_none=True) for item in response.output],
        "usage": serialize_usage(response.usage),
        "response_id": response.response_id,
        "request_id": response.request_id,
    }


def _load(recorded: dict[str, Any]) -> ModelResponse:
    """The model response :func:`_dump` recorded."""
    return ModelResponse(
        output=[_OUTPUT_ITEM.validate_python(item) for item in recorded["output"]],
        usage=deserialize_usage(recorded["usage"]),
        response_id=recorded.get("response_id"),
        request_id=recorded.get("request_id"),
    )
