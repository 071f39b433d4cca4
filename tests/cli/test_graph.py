"""``agentlog graph`` draws every edge a step can take, and none it cannot
(issue 21 item 7)."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from agentlog.cli import app

runner = CliRunner()

TRIAGE = """
from agentlog.runtime import StepContext, Workflow, end, goto

wf = Workflow("triage", state={"score": "replace", "note": "replace", "next": "replace"})


@wf.step(then="review")
async def classify(ctx: StepContext):
    if ctx.state["score"] > 5:
        return goto("escalate", note="hot")
    if ctx.state["score"] < 0:
        return end(note="spam")
    return {"note": "normal"}


@wf.step
async def review(ctx: StepContext):
    return {"note": "reviewed"}


@wf.step(routes=["review", "classify"])
async def escalate(ctx: StepContext):
    return goto("review" if ctx.state["score"] > 9 else ctx.state["next"])


@wf.step
async def wander(ctx: StepContext):
    return goto(ctx.state["next"])
"""


def _edges(args: list[str]) -> set[tuple[str, str, str]]:
    """The chart's edges as (from, arrow, to)."""
    result = runner.invoke(app, ["graph", *args])
    assert result.exit_code == 0, result.output
    found = [
        re.fullmatch(r"\s+(\w+) (-->|-\.->) (\w+)", line) for line in result.stdout.splitlines()
    ]
    return {(m[1], m[2], m[3]) for m in found if m}


def test_the_demo_is_drawn_connected_with_each_way_to_the_end() -> None:
    assert _edges(["research-agent"]) == {
        ("__start__", "-->", "plan"),
        ("plan", "-.->", "search_web"),
        ("plan", "-.->", "search_papers"),
        ("plan", "-.->", "search_news"),
        ("search_web", "-->", "draft"),
        ("search_papers", "-->", "draft"),
        ("search_news", "-->", "draft"),
        ("draft", "-.->", "approve"),
        ("approve", "-.->", "send_email"),
        ("approve", "-.->", "__end__"),  # not approved
        ("send_email", "-.->", "__end__"),
    }


def test_a_conditional_route_draws_each_branch_and_no_other(tmp_path: Path) -> None:
    (tmp_path / "triage.py").write_text(TRIAGE)
    assert _edges(["triage", "--app", f"{tmp_path / 'triage.py'}:wf"]) == {
        ("__start__", "-->", "classify"),
        ("classify", "-->", "review"),  # a returned dict follows then=
        ("classify", "-.->", "escalate"),
        ("classify", "-.->", "__end__"),
        ("review", "-->", "__end__"),  # a dict with no then= ends the run
        # A computed target: any of the declared routes, and never the end.
        ("escalate", "-.->", "review"),
        ("escalate", "-.->", "classify"),
        # A computed target with no routes declared: any step, said as such.
        ("wander", "-.->", "__any__"),
    }
