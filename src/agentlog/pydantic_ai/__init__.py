"""Pydantic AI agents on agentlog: ``agentlog[pydantic-ai]``.

Wrap any ``pydantic_ai.Agent`` and every run of it is an agentlog run::

    from pydantic_ai import Agent
    from agentlog.pydantic_ai import AgentlogAgent
    from agentlog.runtime import Runtime

    durable = AgentlogAgent(Agent("openai:gpt-5", name="support"))
    async with await Runtime.open(url, workflows=[durable.workflow]) as rt:
        print(await durable.run(rt, "Where is my order?", run_id="ticket-42"))

Each model request and each tool call is a task (at least once, a stable
idempotency key, a recorded result, a retry policy per kind); the message
history is the run's state; tools that need approval park the run on an
interrupt; each model response and tool result reaches ``Runtime.stream`` as
progress, and with ``stream=True`` so do the model's stream events while the
request runs. Only Pydantic AI's public interfaces are used (a capability's
``wrap_model_request``, ``wrap_tool_execute`` and ``on_event`` hooks,
deferred tools, ``ModelMessagesTypeAdapter``). Nothing else in agentlog imports this package.
"""

from agentlog.pydantic_ai._agent import DEFAULT_MODEL_RETRY, AgentlogAgent

__all__ = ["DEFAULT_MODEL_RETRY", "AgentlogAgent"]
