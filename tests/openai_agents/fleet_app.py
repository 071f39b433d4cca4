"""The fleet tests' app: the support agents, journaling each call to $OA_FLEET_JOURNAL.

Loaded by ``agentlog worker --app tests.openai_agents.fleet_app:workflows``;
each line is ``[pid, kind, idempotency key]``, fsynced before the call returns.
"""

from __future__ import annotations

import json
import os

from tests.openai_agents.agents_app import support_workflow


def _record(kind: str, key: str) -> None:
    with open(os.environ["OA_FLEET_JOURNAL"], "a") as out:
        out.write(json.dumps([os.getpid(), kind, key]) + "\n")
        out.flush()
        os.fsync(out.fileno())


support = support_workflow(_record, name="oa-fleet")
workflows = [support]
