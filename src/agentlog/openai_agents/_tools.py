"""A function tool whose invocation, its time limit included, is one agentlog task."""

from __future__ import annotations

import asyncio
import copy
import inspect
from typing import Any

from agents import FunctionTool
from agents.exceptions import ToolTimeoutError
from agents.tool import default_tool_timeout_error_message
from agents.tool_context import ToolContext

from agentlog.runtime import RetryPolicy, StepContext

#: the recorded task name of a function tool call is this, a colon, the tool's name
TOOL_TASK = "openai_agents.tool"


def durable_tool(
    ctx: StepContext[Any], tool: FunctionTool, retry: RetryPolicy | None
) -> FunctionTool:
    """A copy of ``tool`` whose every call is a task of the step ``ctx``.

    The tool's ``timeout_seconds`` moves inside the task, so that what a
    timeout gave the model (the SDK's error text, or a raised
    ``ToolTimeoutError``) is recorded too: left to the SDK, a call that timed
    out would be tried again on replay, might finish in time, and the run
    would go another way than its recorded model responses.
    """
    invoke, timeout, name = tool.on_invoke_tool, tool.timeout_seconds, f"{TOOL_TASK}:{tool.name}"

    async def effect(tool_context: ToolContext[Any], arguments: str) -> Any:
        if timeout is None:
            return await invoke(tool_context, arguments)
        try:
            return await asyncio.wait_for(invoke(tool_context, arguments), timeout)
        except TimeoutError as exc:
            return await _timed_out(tool, tool_context, timeout, exc)

    async def on_invoke_tool(tool_context: ToolContext[Any], arguments: str) -> Any:
        return await ctx.run_task(name, effect, (tool_context, arguments), {}, retry=retry)

    durable = copy.copy(tool)
    durable.on_invoke_tool = on_invoke_tool
    durable.timeout_seconds = None  # the task keeps the time limit
    return durable


async def _timed_out(
    tool: FunctionTool, tool_context: ToolContext[Any], seconds: float, exc: TimeoutError
) -> Any:
    """What the SDK gives the model for a call over its time limit (its ``timeout_behavior``).

    Raises:
        ToolTimeoutError: the tool's ``timeout_behavior`` is "raise_exception".
    """
    error = ToolTimeoutError(tool_name=tool.name, timeout_seconds=seconds)
    if tool.timeout_behavior == "raise_exception":
        raise error from exc
    if tool.timeout_error_function is None:
        return default_tool_timeout_error_message(tool_name=tool.name, timeout_seconds=seconds)
    result = tool.timeout_error_function(tool_context, error)
    return await result if inspect.isawaitable(result) else result
