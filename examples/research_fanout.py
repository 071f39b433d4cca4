"""Research fan-out over a list only known at run time: one branch per question.

``plan`` asks a (fake) model for sub-questions, then fans out with ``Send``:
each question becomes a parallel branch of ``research`` with its own
``ctx.input``. Each branch's findings are recorded as it finishes, so after a
crash only unfinished branches run again. ``write_up`` joins them.

Run it: ``python examples/research_fanout.py``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from agentlog.runtime import Runtime, Send, StepContext, Workflow, end, goto, task


@task(name="llm.plan")
async def plan_questions(topic: str) -> list[str]:
    return [f"{topic}: history", f"{topic}: state of the art", f"{topic}: open problems"]


@task(name="web.search")
async def web_search(question: str) -> dict[str, str]:
    return {"question": question, "finding": f"three sources agree on {question!r}"}


wf = Workflow("research", state={"topic": "replace", "findings": "append", "report": "replace"})


@wf.step(routes=["research"])
async def plan(ctx: StepContext) -> Any:
    questions = await plan_questions(ctx.state["topic"])
    return goto(*(Send("research", question=q) for q in questions))


@wf.step(then="write_up")
async def research(ctx: StepContext) -> Any:
    return {"findings": [await web_search(ctx.input["question"])]}


@wf.step
async def write_up(ctx: StepContext) -> Any:
    lines = [f"- {f['question']}: {f['finding']}" for f in ctx.state["findings"]]
    return end(report="\n".join(lines))


async def main(log_url: str) -> dict[str, Any]:
    async with await Runtime.open(log_url, workflows=[wf]) as rt:
        run = await rt.start(wf, run_id="research-1", input={"topic": "durable agents"})
        values = await run.result(timeout=60)
    print(values["report"])
    print(f"research-1: completed with {len(values['findings'])} findings")
    return values


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    asyncio.run(main(f"sqlite:///{folder / 'research.db'}"))
