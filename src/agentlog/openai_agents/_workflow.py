"""``agent_workflow``: an agent run as a workflow of one step per agent segment."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from agents import Agent, Handoff, RunConfig, RunResult
from agents.exceptions import MaxTurnsExceeded
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from agentlog.errors import WorkflowDefinitionError
from agentlog.openai_agents._agents import DurableAgents, check_agent, check_model_settings
from agentlog.openai_agents._boundary import HandedOff
from agentlog.openai_agents._run import durable_config, run_with_approvals
from agentlog.runtime import Next, RetryPolicy, StepContext, Workflow, end, goto
from agentlog.runtime._frozen import thaw

#: the state keys of an agent workflow, each replaced by the step that writes it
STATE: dict[str, Literal["replace"]] = {
    "input": "replace",
    "agent": "replace",
    "turns": "replace",
    "output": "replace",
}


def agent_workflow(
    name: str,
    starting_agent: Agent[Any],
    *,
    agents: Sequence[Agent[Any]] = (),
    version: str = "1",
    max_turns: int = 10,
    run_config: RunConfig | None = None,
    model_retry: RetryPolicy | None = None,
    tool_retry: RetryPolicy | None = None,
    retry: RetryPolicy | None = None,
) -> Workflow:
    """A workflow that runs ``starting_agent`` with one step per agent segment.

    Each agent reachable through handoffs is a step named after it. A step
    runs its agent with the SDK's ``Runner`` on the conversation in the
    state's ``input``; its model and function tool calls are tasks, its
    approvals interrupts, as with :func:`run_agent`. When the model hands
    off to agent ``B``, the step ends: it writes the conversation ``B`` is
    handed (the SDK's, after any ``input_filter``) to ``input``, ``B``'s name
    to ``agent``, and goes to step ``B``. A step that runs again (a crash,
    a retry, an approval) replays only its own segment. The agent that
    answers writes the final output to ``output`` (a pydantic model as its
    ``model_dump``) and the whole conversation to ``input``.

    Start a run with ``input={"input": "the user's message"}`` (or a list of
    input items in the Responses format).

    Args:
        name: the workflow's name.
        starting_agent: the first step's agent; it and the agents it hands
            off to are copied at each step, not changed.
        agents: agents reached only through a ``Handoff`` object (made by
            ``handoff(...)``), whose target the SDK resolves only at run time.
        version: the workflow's version.
        max_turns: the SDK's limit on model turns, across all segments.
        run_config: the SDK's run settings (as for :func:`run_agent`).
        model_retry: the retry policy of each model call (none: the step's).
        tool_retry: the retry policy of each function tool call.
        retry: each step's retry policy (default: the workflow's default).

    Raises:
        WorkflowDefinitionError: two agents share a name; a ``Handoff``
            leads to an agent not among those found or given; an agent has
            a tool that would run unrecorded on replay, or sets the SDK's
            model retry; or ``run_config`` sets a run-wide ``model`` or a
            ``call_model_input_filter`` (each would hide where a handoff
            leads or change what the next agent is handed).
    """
    config = run_config or RunConfig(tracing_disabled=True)
    for field in ("model", "call_model_input_filter"):
        if getattr(config, field) is not None:
            raise WorkflowDefinitionError(
                f"agent_workflow {name!r}: run_config.{field} is set; give each agent its "
                "model (and filter what an agent is handed with its handoff's input_filter), "
                "or run the agents in one step with run_agent"
            )
    check_model_settings(config.model_settings, "run_config")
    found = _agents(name, starting_agent, agents)
    wf = Workflow(name, version=version, state=STATE, retry=retry)
    options: dict[str, Any] = {
        "config": config,
        "max_turns": max_turns,
        "model_retry": model_retry,
        "tool_retry": tool_retry,
    }
    for agent in found.values():
        routes = [_target_name(target) for target in agent.handoffs]
        _add_step(wf, agent, sorted(set(routes) - {agent.name}), options)
    return wf


def _add_step(wf: Workflow, agent: Agent[Any], routes: list[str], options: dict[str, Any]) -> None:
    """Register the step that runs ``agent``'s segments."""

    async def segment(ctx: StepContext[Any]) -> Next:
        return await run_segment(ctx, agent, **options)

    wf.step(name=agent.name, routes=routes)(segment)


async def run_segment(
    ctx: StepContext[Any],
    agent: Agent[Any],
    *,
    config: RunConfig,
    max_turns: int,
    model_retry: RetryPolicy | None,
    tool_retry: RetryPolicy | None,
) -> Next:
    """Run ``agent`` on the state's conversation until it answers or hands off.

    Raises:
        MaxTurnsExceeded: the segments before this one used up ``max_turns``.
    """
    turns = int(ctx.state.get("turns") or 0)
    if turns >= max_turns:
        raise MaxTurnsExceeded(f"Max turns ({max_turns}) exceeded before agent {agent.name!r}")
    durable = DurableAgents(ctx, config.model_provider, model_retry, tool_retry, segment=agent)
    options = {"max_turns": max_turns - turns, "run_config": durable_config(config, durable)}
    try:
        result = await run_with_approvals(
            ctx, durable.agent(agent), thaw(ctx.state["input"]), options
        )
    except HandedOff as handed:
        return goto(
            handed.agent.name,
            input=handed.conversation,
            agent=handed.agent.name,
            turns=turns + durable.model_calls,
        )
    return end(
        output=_output(result),
        input=to_jsonable_python(result.to_input_list()),
        agent=agent.name,
        turns=turns + durable.model_calls,
    )


def _output(result: RunResult) -> Any:
    """The final output as builtin values (a pydantic model as its dump)."""
    output = result.final_output
    return output.model_dump(mode="json") if isinstance(output, BaseModel) else output


def _target_name(target: Agent[Any] | Handoff[Any, Any]) -> str:
    return target.name if isinstance(target, Agent) else target.agent_name


def _agents(name: str, start: Agent[Any], given: Sequence[Agent[Any]]) -> dict[str, Agent[Any]]:
    """Every agent reachable from ``start`` and ``given``, by name, checked.

    Raises:
        WorkflowDefinitionError: see :func:`agent_workflow`.
    """
    found: dict[str, Agent[Any]] = {}
    todo = [start, *given]
    while todo:
        agent = todo.pop(0)
        if found.get(agent.name) is agent:
            continue
        if agent.name in found:
            raise WorkflowDefinitionError(
                f"agent_workflow {name!r}: two agents named {agent.name!r}; each agent is "
                "a step named after it, so give each its own name"
            )
        check_agent(agent)
        found[agent.name] = agent
        todo.extend(target for target in agent.handoffs if isinstance(target, Agent))
    for agent in list(found.values()):
        for target in agent.handoffs:
            if isinstance(target, Handoff) and target.agent_name not in found:
                raise WorkflowDefinitionError(
                    f"agent_workflow {name!r}: agent {agent.name!r} hands off to "
                    f"{target.agent_name!r} through a Handoff object, whose agent is known only "
                    "at run time: pass that agent in agent_workflow(..., agents=[...])"
                )
    return found
