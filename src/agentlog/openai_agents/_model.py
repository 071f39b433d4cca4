"""A model whose every call is an agentlog task, so a replay never calls it again."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Handoff, Model, ModelResponse, ModelSettings, ModelTracing, Tool
from agents.agent_output import AgentOutputSchemaBase
from agents.items import TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
from agents.usage import deserialize_usage, serialize_usage
from pydantic import TypeAdapter

from agentlog.errors import NondeterminismError, WorkflowDefinitionError
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
        self._calls = 0  # this model's calls in this execution of the step

    @property
    def calls(self) -> int:
        """This model's calls (recorded or replayed) in this execution of the step."""
        return self._calls

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
        """The model's response: recorded by the first call, replayed after it.

        Raises:
            NondeterminismError: the step replays, and the conversation the
                model is asked differs from the one its recorded response
                answered (``position`` counts this agent's model calls).
        """
        asked = _digest(system_instructions, input)

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
            return {**_dump(response), "asked": asked}

        recorded = await self._ctx.run_task(self._name, call, (), {}, retry=self._retry)
        if recorded["asked"] != asked:
            raise _changed(self._ctx, self._calls, self._name)
        self._calls += 1
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


def _digest(instructions: str | None, input: str | list[TResponseInputItem]) -> str:
    """A fingerprint of what the model is asked.

    A recorded response is handed back only for the conversation it answered:
    code that changed under a running run (other instructions, another tool
    result, a tool that timed out once) would otherwise get another turn's
    response. A value that is not JSON counts by its type alone, so nothing
    that differs between processes (an address in a repr) breaks a replay.
    """
    text = json.dumps([instructions, input], sort_keys=True, default=lambda v: type(v).__name__)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _changed(ctx: StepContext[Any], calls: int, name: str) -> NondeterminismError:
    """The error of a replayed model call asked another conversation than it answered."""
    recorded = f"{name} for another conversation"
    return NondeterminismError(ctx.run_id, ctx.step, calls, recorded, name)


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
