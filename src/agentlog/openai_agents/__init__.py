"""The OpenAI Agents SDK on agentlog: ``agentlog[openai-agents]``.

Run an ``agents.Agent`` with the SDK's own runner inside a workflow step, and
the run is an agentlog run::

    from agentlog.openai_agents import run_agent

    @wf.step
    async def chat(ctx: StepContext):
        result = await run_agent(ctx, triage_agent, ctx.state["question"])
        return end(answer=result.final_output)

Each model call and each function tool call is a task (at least once, with a
stable idempotency key, a recorded result and an optional retry policy per
kind); a crashed, taken over or resumed run replays the SDK's runner over the
recorded responses, so it continues with the agent it had handed off to and
calls neither the model nor a tool again for a recorded turn; a tool with
``needs_approval`` parks the run on an interrupt. Only the SDK's public
interfaces are used (``Model``, ``FunctionTool``, ``Handoff``, ``Runner``,
``RunState``).

``agent_workflow(name, triage_agent)`` builds a whole workflow instead, with
one step per agent segment: a handoff ends the step, writes the conversation
so far to the run's state, and the next step runs the agent handed off to.
Nothing else in agentlog imports this package or ``agents``.
"""

from agentlog.openai_agents._model import MODEL_TASK
from agentlog.openai_agents._run import run_agent
from agentlog.openai_agents._tools import TOOL_TASK
from agentlog.openai_agents._workflow import agent_workflow

__all__ = ["MODEL_TASK", "TOOL_TASK", "agent_workflow", "run_agent"]
