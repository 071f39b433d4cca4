"""``run_agent``: the SDK's runner inside a step, approvals parked as interrupts."""

from __future__ import annotations

import dataclasses
from typing import Any

from agents import Agent, Model, RunConfig, Runner, RunResult, ToolApprovalItem
from agents.exceptions import UserError
from agents.items import TResponseInputItem

from agentlog.errors import AgentlogError, WorkflowDefinitionError
from agentlog.openai_agents._agents import DurableAgents, check_model_settings
from agentlog.runtime import RetryPolicy, StepContext


async def run_agent(
    ctx: StepContext[Any],
    agent: Agent[Any],
    input: str | list[TResponseInputItem],
    *,
    context: Any = None,
    max_turns: int = 10,
    run_config: RunConfig | None = None,
    model_retry: RetryPolicy | None = None,
    tool_retry: RetryPolicy | None = None,
) -> RunResult:
    """Run ``agent`` with the SDK's ``Runner`` as part of the step ``ctx``.

    Every model call (of any agent the run hands off to) is a task named
    ``openai_agents.model:<agent>`` and every function tool call a task named
    ``openai_agents.tool:<tool>``: each runs at least once, with a stable
    idempotency key and a recorded result. A re-executed step (after a crash,
    a takeover or an approval) runs the SDK's runner again from the start;
    the recorded responses bring it back, through the same handoffs, to where
    it stopped, without calling the model or a tool again.

    A tool that needs approval (``needs_approval``) parks the run on an
    interrupt with ``{"kind": "tool_approval", "agent", "tool", "arguments"}``
    that expects a bool: ``rt.resume(run_id, True)`` runs the tool, ``False``
    tells the model it was rejected.

    Args:
        ctx: the step's context.
        agent: the agent to start with; it and the agents it hands off to are
            copied, not changed.
        input: the user's message, or input items in the Responses format.
        context: the SDK's run context object, handed to tools.
        max_turns: the SDK's limit on model turns.
        run_config: the SDK's run settings; its model provider resolves
            agents whose model is a name. Without one, the SDK's tracing
            (an export to OpenAI) is off; a config of yours keeps its own
            ``tracing_disabled``.
        model_retry: the retry policy of each model call (none: the step's).
        tool_retry: the retry policy of each function tool call.

    Returns:
        The SDK's ``RunResult`` (``final_output``, ``new_items``, ...).

    Raises:
        WorkflowDefinitionError: ``ctx`` is not a StepContext; the config
            sets a model for the whole run by name; an agent has a tool that
            would run unrecorded on replay (MCP servers, computer, shell,
            apply_patch, custom tools); or the SDK's own model retry
            (``ModelSettings.retry``) is set (use ``model_retry``).
    """
    if not isinstance(ctx, StepContext):
        raise WorkflowDefinitionError(
            f"run_agent needs the step's StepContext as its first argument, got {ctx!r}"
        )
    config = run_config or RunConfig(tracing_disabled=True)
    check_model_settings(config.model_settings, "run_config")
    agents = DurableAgents(ctx, config.model_provider, model_retry, tool_retry)
    config = durable_config(config, agents)
    start = agents.agent(agent)
    options: dict[str, Any] = {"context": context, "max_turns": max_turns, "run_config": config}
    return await run_with_approvals(ctx, start, input, options)


async def run_with_approvals(
    ctx: StepContext[Any],
    start: Agent[Any],
    input: str | list[TResponseInputItem],
    options: dict[str, Any],
) -> RunResult:
    """``Runner.run``, each approval it stops for asked as an interrupt of ``ctx``."""
    result = await _run(start, input, options)
    while result.interruptions:
        state = result.to_state()
        for item in result.interruptions:
            if ctx.interrupt(_approval(item), expects=bool):
                state.approve(item)
            else:
                state.reject(item)
        result = await _run(start, state, options)
    return result


async def _run(start: Agent[Any], input: Any, options: dict[str, Any]) -> RunResult:
    """``Runner.run``, with agentlog's own errors as agentlog raised them.

    The SDK wraps an error of a tool call in its ``UserError``. An agentlog
    error from the tool's task (the writer lost its lease or was fenced, the
    history has another task there, a task's retry policy gave up) must
    reach the executor as itself: wrapped, it read as the step's own failure,
    and a writer that had to stop failed the run over its step retries.
    """
    try:
        return await Runner.run(start, input, **options)
    except UserError as exc:
        if not isinstance(exc.__cause__, AgentlogError):
            raise
        stopped = exc.__cause__
    raise stopped  # outside the handler: its own cause and context, not the wrapper


def durable_config(config: RunConfig, agents: DurableAgents) -> RunConfig:
    """``config`` with its run-wide model (if any) made durable."""
    if config.model is None:
        return config
    if not isinstance(config.model, Model):
        raise WorkflowDefinitionError(
            f"run_config.model={config.model!r} is a name: give each agent its model name "
            "instead (run_config.model_provider resolves it), or pass a Model instance"
        )
    return dataclasses.replace(config, model=agents.model(config.model, "run_config"))


def _approval(item: ToolApprovalItem) -> dict[str, Any]:
    """What an approval interrupt shows the human (builtin values)."""
    return {
        "kind": "tool_approval",
        "agent": item.agent.name,
        "tool": item.name,
        "arguments": item.arguments,
    }
