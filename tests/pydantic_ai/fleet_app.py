"""The support agent for ``agentlog worker --app tests.pydantic_ai.fleet_app:workflows``.

Each model request and tool call POSTs to the dedup service (its URL in
``FLEET_DEDUP``) with its idempotency key and the worker's pid as ``gen``,
then takes ``CALL_S`` (a model's latency), so a SIGKILL often lands between
a delivery and its recorded result.
"""

from __future__ import annotations

import asyncio
import os

from agentlog.pydantic_ai import AgentlogAgent
from agentlog.runtime import current_idempotency_key
from tests.crash.worker import _post
from tests.pydantic_ai.agents import support_agent

__all__ = ["CALL_S", "durable", "workflows"]

CALL_S = 0.3


async def _report(kind: str, arg: str) -> None:
    body = {"run": "pydantic_ai", "gen": os.getpid(), "key": current_idempotency_key()}
    await asyncio.to_thread(
        _post, os.environ["FLEET_DEDUP"] + "/effect", {**body, "kind": kind, "arg": arg}
    )
    await asyncio.sleep(CALL_S)


durable = AgentlogAgent(support_agent(_report))
workflows = [durable.workflow]
