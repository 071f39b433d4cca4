"""Two approvals at once: legal and finance review a contract in parallel.

Both branches park on their own interrupt. The run waits with no process
alive; ``pending()`` lists both questions with their ids, and each reviewer
answers theirs, in any order, from any process. The contract is signed only
if both approve.

Run it: ``python examples/multi_approval.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import tempfile
from pathlib import Path
from typing import Any

from agentlog.runtime import Runtime, StepContext, Workflow, end, goto


@dataclasses.dataclass
class Review:
    approved: bool
    comment: str


wf = Workflow("contract", state={"contract": "replace", "reviews": "append", "signed": "replace"})


@wf.step(routes=["legal", "finance"])
async def submit(ctx: StepContext) -> Any:
    return goto("legal", "finance")


@wf.step(then="sign")
async def legal(ctx: StepContext) -> Any:
    review = ctx.interrupt({"team": "legal", "contract": ctx.state["contract"]}, expects=Review)
    return {"reviews": [{"team": "legal", **dataclasses.asdict(review)}]}


@wf.step(then="sign")
async def finance(ctx: StepContext) -> Any:
    review = ctx.interrupt({"team": "finance", "contract": ctx.state["contract"]}, expects=Review)
    return {"reviews": [{"team": "finance", **dataclasses.asdict(review)}]}


@wf.step
async def sign(ctx: StepContext) -> Any:
    return end(signed=all(r["approved"] for r in ctx.state["reviews"]))


async def main(log_url: str) -> dict[str, Any]:
    async with await Runtime.open(log_url, workflows=[wf]) as rt:
        run = await rt.start(wf, run_id="contract-7", input={"contract": "ACME supply, 2027"})
        await run.wait(timeout=60)
        asks = {p.payload["team"]: p.id for p in await run.pending()}
        print(f"contract-7: waiting on {sorted(asks)}")
    for team in ("finance", "legal"):  # each reviewer, later, from any process
        async with await Runtime.open(log_url, workflows=[wf]) as rt:
            await rt.resume("contract-7", {asks[team]: {"approved": True, "comment": "ok"}})
            state = await rt.wait("contract-7", timeout=60)
            print(f"{team} answered; run is {state.status}")
    async with await Runtime.open(log_url, workflows=[wf]) as rt:
        values = await rt.result("contract-7", timeout=60)
    print(f"contract-7: completed, signed={values['signed']}")
    return values


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    asyncio.run(main(f"sqlite:///{folder / 'contract.db'}"))
