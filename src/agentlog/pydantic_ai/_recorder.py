"""The capability that turns an agent's model requests and tool calls into agentlog tasks.

Pydantic AI calls :meth:`_Recorder.wrap_model_request` and
:meth:`_Recorder.wrap_tool_execute` around every model request and tool call
of a run (its public capability hooks). Each becomes ``ctx.run_task``: the
call runs at least once with a stable idempotency key, its result is
recorded, and a step that runs again after a crash gets the recorded result
instead of calling the model or the tool again.

A result is recorded in its JSON form (a model response through Pydantic AI's
own ``ModelMessagesTypeAdapter``), and the live run gets that same form back,
so a first run and a replay feed the agent the same values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import ModelMessagesTypeAdapter
from pydantic_ai.capabilities import (
    AbstractCapability,
    ValidatedToolArgs,
    WrapModelRequestHandler,
    WrapToolExecuteHandler,
)
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_core import to_jsonable_python

from agentlog.runtime import RetryPolicy, StepContext

#: The key of a recorded tool result that is one of Pydantic AI's control-flow
#: exceptions (asking the model to retry, or deferring the call), not a value.
_RAISED = "__pydantic_ai_raised__"


def dump_response(response: ModelResponse) -> dict[str, Any]:
    """A model response as builtin values, in Pydantic AI's own message format."""
    dumped: dict[str, Any] = ModelMessagesTypeAdapter.dump_python([response], mode="json")[0]
    return dumped


def load_response(data: Mapping[str, Any]) -> ModelResponse:
    """The model response :func:`dump_response` recorded."""
    [message] = ModelMessagesTypeAdapter.validate_python([dict(data)])
    if not isinstance(message, ModelResponse):  # pragma: no cover - the format says so
        raise TypeError(f"a recorded model response holds a {type(message).__name__}")
    return message


def _raised(exc: ModelRetry | ApprovalRequired | CallDeferred) -> dict[str, Any]:
    """A control-flow exception of a tool as a recordable value."""
    if isinstance(exc, ModelRetry):
        return {_RAISED: "retry", "message": exc.message}
    metadata = to_jsonable_python(exc.metadata)
    if isinstance(exc, ApprovalRequired):
        return {_RAISED: "approval", "metadata": metadata}
    return {_RAISED: "deferred", "metadata": metadata, "kind": exc.kind}


def _reraise(recorded: Any) -> Any:
    """Raise the control-flow exception a tool raised, or return its value."""
    if not (isinstance(recorded, dict) and _RAISED in recorded):
        return recorded
    kind = recorded[_RAISED]
    if kind == "retry":
        raise ModelRetry(recorded["message"])
    if kind == "approval":
        raise ApprovalRequired(metadata=recorded["metadata"])
    raise CallDeferred(metadata=recorded["metadata"], kind=recorded["kind"])


@dataclass
class _Recorder(AbstractCapability[Any]):
    """Runs each model request and tool call of one agent run as a task of ``ctx``.

    Attributes:
        ctx: the step the agent runs in.
        prefix: the task names' prefix (the workflow's name), stable across releases.
        model_retry: the retry policy of a model request.
        tool_retry: the retry policy of a tool call without its own.
        tool_retries: a retry policy per tool name.
    """

    ctx: StepContext[Any]
    prefix: str
    model_retry: RetryPolicy | None
    tool_retry: RetryPolicy | None
    tool_retries: Mapping[str, RetryPolicy | None] = field(default_factory=dict)
    #: True while the model request in hand runs live (not answered from the log).
    live: bool = field(default=False, init=False)

    async def flush(self) -> None:
        """Publish what waits to be published (see the streaming subclass)."""

    def discard(self) -> None:
        """Drop what waits to be published: the step failed."""

    async def wrap_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        handler: WrapModelRequestHandler,
    ) -> ModelResponse:
        self.live = False

        async def request() -> dict[str, Any]:
            self.live = True
            response = dump_response(await handler(request_context))
            await self.flush()
            await self.ctx.progress({"pydantic_ai": "model_response", "response": response})
            return response

        name = f"{self.prefix}.model_request"
        recorded = await self.ctx.run_task(name, request, (), {}, retry=self.model_retry)
        return load_response(recorded)

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        async def execute() -> Any:
            try:
                result = to_jsonable_python(await handler(args))
            except (ModelRetry, ApprovalRequired, CallDeferred) as exc:
                return _raised(exc)
            except Exception as exc:
                # Pydantic AI turns a tool's ModelRetry into its own retry error raised
                # from it; record the ModelRetry, and raise it from this hook on every
                # execution, so the tool manager counts the retry the same way each time.
                if isinstance(exc.__cause__, ModelRetry):
                    return _raised(exc.__cause__)
                raise
            await self.ctx.progress(
                {
                    "pydantic_ai": "tool_result",
                    "tool_name": call.tool_name,
                    "tool_call_id": call.tool_call_id,
                    "result": result,
                }
            )
            return result

        name = f"{self.prefix}.tool.{call.tool_name}"
        retry = self.tool_retries.get(call.tool_name, self.tool_retry)
        return _reraise(await self.ctx.run_task(name, execute, (), {}, retry=retry))
