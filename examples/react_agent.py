"""A ReAct agent: the model picks tools, they run in parallel, a dangerous one needs approval.

The loop is ``agent`` -> ``tools`` -> ``agent`` ... until the model answers.
``tools`` fans out with ``Send``: one branch per tool call, side by side,
each recorded as it finishes. ``refund`` is dangerous: its branch parks on an
approval first, and the refund runs (once, with a stable idempotency key)
only if a human says yes. The model here is a stand-in that plans from the
transcript, so the example runs offline.

Run it: ``python examples/react_agent.py``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypedDict

from agentlog.runtime import (
    Runtime,
    Send,
    StepContext,
    Workflow,
    current_idempotency_key,
    end,
    goto,
    task,
)

REFUNDS: dict[str, int] = {}  # the payment service: one refund per idempotency key


class ToolCall(TypedDict):
    tool: str
    args: dict[str, Any]


@task(name="llm.chat")
async def chat_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A stand-in model: look the order up and check stock, then refund, then answer."""
    seen = {m["tool"] for m in messages if m["role"] == "tool"}
    if not seen:
        calls = [
            {"tool": "lookup_order", "args": {"order": "A-17"}},
            {"tool": "check_stock", "args": {"sku": "kettle"}},
        ]
        return {"role": "assistant", "tool_calls": calls}
    if "refund" not in seen:
        return {"role": "assistant", "tool_calls": [{"tool": "refund", "args": {"cents": 2599}}]}
    return {"role": "assistant", "content": "Your refund of $25.99 is on its way."}


@task(name="tool.lookup_order")
async def lookup_order(order: str) -> str:
    return f"order {order}: kettle, delivered broken"


@task(name="tool.check_stock")
async def check_stock(sku: str) -> str:
    return f"{sku}: out of stock"


@task(name="tool.refund")
async def refund(cents: int) -> str:
    REFUNDS.setdefault(current_idempotency_key(), cents)
    return f"refunded {cents} cents"


TOOLS: dict[str, Callable[..., Awaitable[str]]] = {
    "lookup_order": lookup_order,
    "check_stock": check_stock,
    "refund": refund,
}
DANGEROUS = {"refund"}


class Approval(TypedDict):
    approved: bool


wf = Workflow("react", state={"messages": "append", "answer": "replace"}, max_steps=50)


@wf.step(routes=["tools"])
async def agent(ctx: StepContext) -> Any:
    reply = await chat_model(list(ctx.state["messages"]))
    if "tool_calls" not in reply:
        return end(messages=[reply], answer=reply["content"])
    sends = [Send("tools", call=call) for call in reply["tool_calls"]]
    return goto(*sends, messages=[reply])


@wf.step(then="agent")
async def tools(ctx: StepContext) -> Any:
    call: ToolCall = ctx.input["call"]
    if call["tool"] in DANGEROUS:
        answer = ctx.interrupt({"tool": call["tool"], "args": call["args"]}, expects=Approval)
        if not answer["approved"]:
            return {"messages": [{"role": "tool", "tool": call["tool"], "content": "denied"}]}
    result = await TOOLS[call["tool"]](**call["args"])
    return {"messages": [{"role": "tool", "tool": call["tool"], "content": result}]}


async def main(log_url: str) -> dict[str, Any]:
    async with await Runtime.open(log_url, workflows=[wf]) as rt:
        run = await rt.start(wf, run_id="chat-9", input={"messages": [{"role": "user"}]})
        await run.wait(timeout=60)
        [ask] = await run.pending()
        print(f"chat-9: waiting for approval of {ask.payload}")
        await run.resume({"approved": True})  # the one open interrupt
        values = await run.result(timeout=60)
    print(values["answer"])
    print(f"chat-9: completed; refunds made: {len(REFUNDS)}")
    return values


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    asyncio.run(main(f"sqlite:///{folder / 'react.db'}"))
