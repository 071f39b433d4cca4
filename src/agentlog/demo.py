"""The demo's former import path: the demo lives in :mod:`agentlog.cli._demo`.

Kept so that ``from agentlog.demo import run_demo`` goes on working. Like
``__main__``, this module is an entry point at the top of the layers: it
imports the CLI, and nothing in agentlog imports it.
"""

from agentlog.cli._demo import Outbox, demo_workflow, run_demo

__all__ = ["Outbox", "demo_workflow", "run_demo"]
