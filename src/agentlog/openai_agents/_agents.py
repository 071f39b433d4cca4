"""A copy of an agent graph whose model calls and function tools are agentlog tasks."""

from __future__ import annotations

import copy
from typing import Any

from agents import (
    Agent,
    ApplyPatchTool,
    ComputerTool,
    CustomTool,
    FunctionTool,
    Handoff,
    LocalShellTool,
    Model,
    ModelProvider,
    ModelSettings,
    RunContextWrapper,
    ShellTool,
)

from agentlog.errors import WorkflowDefinitionError
from agentlog.openai_agents._boundary import boundary
from agentlog.openai_agents._model import DurableModel
from agentlog.openai_agents._tools import durable_tool
from agentlog.runtime import RetryPolicy, StepContext

#: tools the SDK runs on this machine outside ``on_invoke_tool``: not recordable
_LOCAL_TOOLS = (ApplyPatchTool, ComputerTool, CustomTool, LocalShellTool, ShellTool)


class DurableAgents:
    """Converts agents for one execution of one step.

    Each agent reachable from the first (through handoffs, in cycles too) is
    copied once: its model becomes a :class:`DurableModel` and each function
    tool's invocation a task. The caller's agents are left as they were.
    With ``segment``, only that agent is made durable: any other agent is a
    :func:`boundary` copy, whose first model call ends the step's segment.
    """

    def __init__(
        self,
        ctx: StepContext[Any],
        provider: ModelProvider,
        model_retry: RetryPolicy | None,
        tool_retry: RetryPolicy | None,
        segment: Agent[Any] | None = None,
    ) -> None:
        self._ctx, self._provider = ctx, provider
        self._model_retry, self._tool_retry = model_retry, tool_retry
        self._segment = segment
        self._copies: dict[int, Agent[Any]] = {}
        self._models: list[DurableModel] = []

    @property
    def model_calls(self) -> int:
        """The model calls the durable copies made (or replayed) so far."""
        return sum(model.calls for model in self._models)

    def agent(self, agent: Agent[Any]) -> Agent[Any]:
        """The durable copy of ``agent`` (the same copy on every call)."""
        done = self._copies.get(id(agent))
        if done is not None:
            return done
        if self._segment is not None and agent is not self._segment:
            self._copies[id(agent)] = boundary(agent)
            return self._copies[id(agent)]
        check_agent(agent)
        model = agent.model
        inner = model if isinstance(model, Model) else self._provider.get_model(model)
        durable = agent.clone(model=self.model(inner, agent.name))
        self._copies[id(agent)] = durable  # before the handoffs: they may lead back here
        durable.tools = [self._tool(tool) for tool in agent.tools]
        durable.handoffs = [self._handoff(target) for target in agent.handoffs]
        return durable

    def model(self, inner: Model, agent: str) -> DurableModel:
        """``inner`` with each call recorded as a task named for ``agent``."""
        model = DurableModel(self._ctx, inner, agent, self._model_retry)
        self._models.append(model)
        return model

    def _tool(self, tool: Any) -> Any:
        """A function tool whose invocation is a task; any other tool as it is."""
        if not isinstance(tool, FunctionTool):
            return tool
        return durable_tool(self._ctx, tool, self._tool_retry)

    def _handoff(self, target: Agent[Any] | Handoff[Any, Any]) -> Agent[Any] | Handoff[Any, Any]:
        """A handoff whose target agent is the durable copy."""
        if isinstance(target, Agent):
            return self.agent(target)
        invoke = target.on_invoke_handoff

        async def on_invoke_handoff(context: RunContextWrapper[Any], arguments: str) -> Any:
            return self.agent(await invoke(context, arguments))

        durable = copy.copy(target)
        durable.on_invoke_handoff = on_invoke_handoff
        return durable


def check_agent(agent: Agent[Any]) -> None:
    """Refuse what would run again, unrecorded, each time the step replays.

    Raises:
        WorkflowDefinitionError: ``agent`` has MCP servers or a local tool
            other than a function tool, or asks the SDK to retry model calls.
    """
    local = [type(tool).__name__ for tool in agent.tools if isinstance(tool, _LOCAL_TOOLS)]
    if agent.mcp_servers:
        local.append("mcp_servers")
    if local:
        raise WorkflowDefinitionError(
            f"agent {agent.name!r} has {', '.join(local)}: those run on this machine outside "
            "a recorded task and would run again whenever the step replays; call the effect "
            "from a function_tool instead (or use a hosted tool, which the model call records)"
        )
    check_model_settings(agent.model_settings, f"agent {agent.name!r}")


def check_model_settings(settings: ModelSettings | None, whose: str) -> None:
    """Refuse the SDK's own model retries: each try would be a task call of its
    own, so a replay could hand one turn the recorded response of another.

    Raises:
        WorkflowDefinitionError: ``settings.retry`` is set.
    """
    if settings is not None and settings.retry is not None:
        raise WorkflowDefinitionError(
            f"{whose} sets ModelSettings.retry: the SDK would call the model again outside "
            "the recorded task; drop it and pass run_agent(..., model_retry=RetryPolicy(...)), "
            "which retries a model call inside its task"
        )
