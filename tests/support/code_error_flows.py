"""A workflow whose step breaks the workflow's contract in a way chosen by
its input, for the tests of code errors in steps (issue 19, item 4).

Loaded by the unit tests and by ``agentlog worker --app
tests.support.code_error_flows:workflows`` in the fleet test. With
``input={"mistake": ...}`` its only step:

* ``tuple``: returns a tuple instead of writes;
* ``key``: writes a key the state schema does not declare;
* ``expects``: asks an interrupt with an ``expects`` that names no type.

Any other ``mistake`` (the fixed code) ends the run with ``done=True``.
"""

from __future__ import annotations

from typing import Any

from agentlog.runtime import StepContext, Workflow, end

__all__ = ["MISTAKES", "broken", "workflows"]

#: Each mistake, with what the recorded failure must say about it.
MISTAKES: dict[str, str] = {
    "tuple": "InvalidWriteError: step 'only' returned tuple",
    "key": "InvalidWriteError: step 'only' wrote 'nope', which the state schema",
    "expects": "WorkflowDefinitionError: expects='boolean' is not a type name",
}

broken = Workflow("broken", state={"mistake": "replace", "done": "replace"})


@broken.step
async def only(ctx: StepContext) -> Any:
    mistake = ctx.state["mistake"]
    if mistake == "tuple":
        return ("done", True)
    if mistake == "key":
        return {"nope": 1}
    if mistake == "expects":
        ctx.interrupt("go on?", expects="boolean")
    return end(done=True)


#: What ``--app tests.support.code_error_flows:workflows`` loads.
workflows = [broken]
